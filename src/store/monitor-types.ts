import type { Element, Run, RunStatus, TriggerType } from "./model.ts";

/** Monitoring reads (docs/monitoring.md): the query the store compiles and what it answers. */

/** Fields of RunOrderInfo.name (docs/monitoring.md). */
export type SortField =
  | "runId"
  | "runName"
  | "createTime"
  | "startTime"
  | "endTime"
  | "duration"
  | "runStatus"
  | "triggerType"
  | "version"
  | "initiator"
  | "summary";
export type StringColumn =
  | "runId"
  | "runName"
  | "initiator"
  | "version"
  | "summary"
  | "triggerType"
  | "runStatus";
export type IntervalColumn = "startTime" | "endTime" | "createTime" | "duration";
export type StringOp = "contains" | "eq" | "prefix";

export interface StringColFilter {
  kind: "string";
  column: StringColumn;
  value: string;
  op: StringOp;
}

export interface IntervalColFilter {
  kind: "interval";
  column: IntervalColumn;
  from: number | null;
  to: number | null;
}

export type ColFilter = StringColFilter | IntervalColFilter;

export interface SortKey {
  field: SortField;
  asc: boolean;
}

/** A validated PagedRunsFilter, minus the locator: what the store compiles into SQL. */
export interface RunQuery {
  /** null: no status filter. Never applied to the five status counts. */
  statuses: RunStatus[] | null;
  triggers: TriggerType[] | null;
  versions: string[] | null;
  /** Lower-cased search text; null when absent or blank. */
  quickSearch: string | null;
  colFilters: ColFilter[];
  /** Always ends with runId, so that every order is total (stable pages). */
  orderBy: SortKey[];
  limit: number;
  offset: number;
}

/** A run as monitoring lists it: without the bulky result, output and detail columns. */
export type RunRecord = Omit<Run, "result" | "error" | "stdout" | "stderr" | "detail">;

export type StatusCounts = Record<RunStatus, number>;

export interface RunPage {
  /** Per status, every filter applied except the status filter. */
  counts: StatusCounts;
  /** Matches of every filter, the status filter included. */
  totalCount: number;
  runs: RunRecord[];
}

export interface FlowOverviewRow {
  element: Element;
  revisionName: string | null;
  totalRuns: number;
  lastRun: RunRecord | null;
}

export interface FlowListRow {
  element: Element;
  inProcessCount: number;
}
