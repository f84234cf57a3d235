/** The one narrow interface through which Sluice reads and writes its state. */

import type { ElementStore } from "./element-store-types.ts";
import type { ScriptEnvStore } from "./kysely-script-envs.ts";
import type { Scope, ScopeFilter } from "./model.ts";
import type { FlowListRow, FlowOverviewRow, RunPage, RunQuery } from "./monitor-types.ts";
import type { RunLimitStore } from "./run-limit-types.ts";
import type { RunStore } from "./run-store-types.ts";

// The store's vocabulary is imported from here, wherever each part of it is declared.
export type {
  ElementQuery,
  ElementStore,
  NewFlowDeploy,
  NewScriptElement,
} from "./element-store-types.ts";
export type { ImportFlow, ImportWrites } from "./import-types.ts";
export * from "./model.ts";
export type {
  ColFilter,
  FlowListRow,
  FlowOverviewRow,
  IntervalColFilter,
  IntervalColumn,
  RunPage,
  RunQuery,
  RunRecord,
  SortField,
  SortKey,
  StatusCounts,
  StringColFilter,
  StringColumn,
  StringOp,
} from "./monitor-types.ts";
export type { RunLimitStore, StartableRun } from "./run-limit-types.ts";
export type { NewRun, RunEnd, RunStore, SqlExecutor, StartedAfter } from "./run-store-types.ts";

/** A flow's current release, as the cron wiring registers it. */
export interface FlowRelease {
  elementId: string;
  scope: Scope;
  elementName: string;
  approved: boolean;
  version: number;
  /** Raw JSON of the release's configure: parsed only when the version is new to the reader. */
  configureJson: string;
}

/** One error handler's outcome on one run (docs/flow-graph.md `errorHandlerResults`). */
export interface ErrorHandlerResult {
  kind: "email" | "bot" | "custom";
  ok: boolean;
  attempts: number;
  error?: string;
  /** Epoch ms of the last attempt. */
  at: number;
  event: "run.failure" | "run.timeout";
  /** custom: the run the handler started. */
  runId?: string;
}

export interface Store extends ElementStore, RunStore, RunLimitStore, ScriptEnvStore {
  readonly dialect: "sqlite" | "postgres";

  /**
   * The bytes the app stores, every space of it (docs/security.md, "What an app may store"): its
   * runs' parameters and the texts their ends wrote, its flows' revisions, its scripts' versions.
   */
  storedBytes(app: string): Promise<number>;

  /** One page of an element's runs with the five status counts (docs/monitoring.md). */
  monitorRuns(scope: Scope, elementId: string, query: RunQuery): Promise<RunPage>;
  /** Every DPL element of the scope with its release name, run counter and newest run. */
  monitorFlows(scope: Scope): Promise<FlowOverviewRow[]>;
  /** Every DPL element of the scope (null: of every scope) with its unfinished in-process runs. */
  listFlows(scope: ScopeFilter): Promise<FlowListRow[]>;

  /** Every DPL element that has a release, with it (cron wiring, at start and on resync). */
  flowReleases(): Promise<FlowRelease[]>;
  /** scheduleId → tick (epoch ms) of its last claimed fire. */
  loadScheduleState(): Promise<Map<string, number>>;
  /** Claims a tick across the cluster: true for exactly one caller; records it as lastRunAt. */
  claimScheduleTick(scheduleId: string, tick: number): Promise<boolean>;
  /** Many claims in few statements; returns the `scheduleId@tick` keys this caller won. */
  claimScheduleTicks(items: readonly { scheduleId: string; tick: number }[]): Promise<Set<string>>;
  /** Forgets claims of ticks before `before` (epoch ms); returns how many. */
  pruneScheduleFires(before: number): Promise<number>;
  /** Whether the flow has a SCHEDULED run created at or after `since` (a claimed tick's run). */
  scheduledRunSince(scope: Scope, elementId: string, since: number): Promise<boolean>;
  addErrorHandlerResult(runId: string, result: ErrorHandlerResult): Promise<void>;
  errorHandlerResults(runId: string): Promise<ErrorHandlerResult[]>;
  /** Drops the results of deleted runs; returns how many. */
  pruneErrorHandlerResults(): Promise<number>;

  close(): Promise<void>;
}
