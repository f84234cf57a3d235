/** The one narrow interface through which Sluice reads and writes its state. */

import type { ImportWrites } from "./import-types.ts";
import type { ScriptEnvStore } from "./kysely-script-envs.ts";
import type { FlowListRow, FlowOverviewRow, RunPage, RunQuery } from "./monitor-types.ts";
import type { Liveness } from "./node-liveness.ts";
import type {
  FlowRevision,
  FlowRevisionInfo,
  Page,
  ReleaseChange,
  ReleaseEvent,
  ScriptEnv,
  ScriptPin,
  ScriptVersion,
  ScriptVersionInfo,
} from "./revision-types.ts";
import type { RunLimitStore } from "./run-limit-types.ts";

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

import type {
  AppBounds,
  Element,
  ElementType,
  FilesRemoved,
  FinishedStatus,
  FlowStatus,
  Folder,
  RerunLink,
  Run,
  RunStatus,
  Scope,
  ScopeFilter,
  ScriptElement,
} from "./model.ts";

export type NewRun = Omit<
  Run,
  | "startTime"
  | "endTime"
  | "duration"
  | "summary"
  | "result"
  | "error"
  | "stdout"
  | "stderr"
  | "detail"
  | "rerunOf"
> & {
  startTime?: number | null;
  rerunOf?: RerunLink | null;
};

export interface RunEnd {
  status: FinishedStatus;
  endTime: number;
  summary: string | null;
  result?: string | null;
  error?: string | null;
  stdout?: string | null;
  stderr?: string | null;
  detail?: Record<string, unknown> | null;
  /**
   * The node that owes the run's error-handler notifications, written with the end
   * (`runs.notify_node`) and cleared once their outcomes are recorded (docs/error-handlers.md).
   * Absent for every end that owes none: SUCCESS, CANCELED, a FAILURE without handlers.
   */
  notifyBy?: string | null;
}

export interface ElementQuery {
  type: ElementType;
  name: string;
  folderId?: string;
}

export interface NewScriptElement {
  scope: Scope;
  folderId: string;
  name: string;
  kind: "module" | "package";
  content: Uint8Array;
  now: number;
  /** Who uploaded it: recorded with the version the upload makes. */
  userId?: string | null;
  /** The environment its dependencies resolved to at upload (docs/script-dependencies.md). */
  env?: ScriptEnv | null;
  /**
   * Versions the script keeps at most (LIMIT_VERSIONS_PER_SCRIPT); absent or 0: every one
   * (docs/script-service.md, "How many versions are kept").
   */
  keepVersions?: number;
  /** A new script is refused past `bounds.elements` (28010006); absent: no bound. */
  bounds?: AppBounds | undefined;
}

export interface NewFlowDeploy {
  scope: Scope;
  folderId: string;
  name: string;
  revisionName: string;
  flow: unknown;
  configure: unknown;
  description: Record<string, string> | null;
  user: Record<string, unknown> | null;
  now: number;
  /** false: a staged revision, stored without becoming the release (default true; docs/dataflow-service.md). */
  release?: boolean;
  /** The script versions the revision pins when it is released. */
  pins?: ScriptPin[] | null;
  /**
   * Revisions the flow keeps at most (LIMIT_REVISIONS_PER_FLOW); absent or 0: every one
   * (docs/dataflow-service.md, "How many revisions are kept").
   */
  keepRevisions?: number;
  /**
   * A new flow is refused past `bounds.elements` (28010006), a release that makes the app's active
   * schedules more past `bounds.schedules` (28010007); absent: no bound.
   */
  bounds?: AppBounds | undefined;
}

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

/** Where a page of `startedOn` begins: after this run. */
export interface StartedAfter {
  createTime: number;
  id: string;
}

export interface Store extends RunLimitStore, ScriptEnvStore {
  readonly dialect: "sqlite" | "postgres";

  folderByPath(scope: Scope, path: string): Promise<Folder | undefined>;
  folderById(scope: Scope, id: string): Promise<Folder | undefined>;
  /** Creates the folder and every missing ancestor. */
  ensureFolder(scope: Scope, path: string, now: number): Promise<Folder>;

  findElements(scope: Scope, query: ElementQuery): Promise<Element[]>;
  elementById(scope: Scope, id: string): Promise<Element | undefined>;
  scriptById(scope: Scope, id: string): Promise<ScriptElement | undefined>;
  /**
   * Insert or (when `overwrite`) replace a script; returns "created" | "overwritten" | "exists",
   * or "full": past `keepVersions` with no version that may go, nothing was written.
   */
  putScript(
    el: NewScriptElement,
    overwrite: boolean,
  ): Promise<"created" | "overwritten" | "exists" | "full">;

  /**
   * Stores a new revision (creating the element as DRAFT if new); with `release`, makes it the
   * release and records the DEPLOY in the release history, in one transaction. Past
   * `keepRevisions` it removes the oldest revisions nothing needs there, or throws 28010005 and
   * writes nothing when none may go.
   */
  deployFlow(deploy: NewFlowDeploy): Promise<{ element: Element; version: number }>;
  /** A release change with its history event, in one transaction; false: no such revision. */
  changeRelease(change: ReleaseChange): Promise<boolean>;
  /** Which of `versions` an element (a flow's revisions, a script's versions) still keeps. */
  keptVersions(
    type: ElementType,
    elementId: string,
    versions: readonly number[],
  ): Promise<Set<number>>;
  /**
   * Which of `versions` a flow once released and no longer keeps: its release history names them,
   * LIMIT_REVISIONS_PER_FLOW removed them (docs/dataflow-service.md, "How many revisions are kept").
   */
  removedRevisions(elementId: string, versions: readonly number[]): Promise<Set<number>>;
  /** One page of an element's revisions, newest first. */
  flowRevisions(elementId: string, limit: number, offset: number): Promise<Page<FlowRevisionInfo>>;
  /** One page of an element's release history, newest first. */
  releaseHistory(elementId: string, limit: number, offset: number): Promise<Page<ReleaseEvent>>;
  /** One page of a script's versions, newest first. */
  scriptVersions(
    elementId: string,
    limit: number,
    offset: number,
  ): Promise<Page<ScriptVersionInfo>>;
  /** One version of a script with its bytes; `null`: the newest. */
  scriptVersion(elementId: string, version: number | null): Promise<ScriptVersion | undefined>;
  /** The newest version's number, without its bytes (what a task records when accepted). */
  newestScriptVersion(elementId: string): Promise<number | undefined>;
  /** Renames the newest revision; false when the element has none. */
  renameRevision(elementId: string, name: string): Promise<boolean>;
  setFlowStatus(
    elementId: string,
    status: FlowStatus,
    user: Record<string, unknown> | null,
    now: number,
  ): Promise<void>;
  flowRevision(elementId: string, version: number): Promise<FlowRevision | undefined>;
  /**
   * A flow's revisions with their graph and configure, oldest first (export, import): every one,
   * or those from version `from` on, at most `limit` (an export pages through them).
   */
  allFlowRevisions(elementId: string, from?: number, limit?: number): Promise<FlowRevision[]>;
  /** Elements of every type in the folder at `path` and the folders below it (export). */
  elementsUnder(scope: Scope, path: string): Promise<Element[]>;
  /** An import's writes in one transaction; answers the IDs of the flows written, in order. */
  applyImport(scope: Scope, writes: ImportWrites, now: number): Promise<string[]>;
  /** A dry run's: refuses (28010006, 28010007) where `applyImport` would, and writes nothing. */
  checkImport(scope: Scope, writes: ImportWrites): Promise<void>;

  /** Inserts a run; with `end`, one that already ended (a fast run-sync is written once). */
  insertRun(run: NewRun, end?: RunEnd): Promise<void>;
  /**
   * Inserts QUEUED runs and runs `also` in the same transaction: the cluster queue inserts the
   * runs' jobs there, so runs and jobs commit together or not at all (docs/cluster.md).
   */
  insertRunsWith(runs: readonly NewRun[], also: (tx: SqlExecutor) => Promise<void>): Promise<void>;
  /** QUEUED → STARTED: the run as started, or undefined when it is no longer QUEUED. */
  startRun(id: string, startTime: number, nodeId: string | null): Promise<Run | undefined>;
  /** Unfinished → terminal; false when the run had already ended (terminal states never change). */
  endRun(id: string, end: RunEnd): Promise<boolean>;
  getRun(scope: ScopeFilter, id: string): Promise<Run | undefined>;
  /** An ended run's kept directory was removed early: says why in its record (docs/security.md, "Disk"). */
  markFilesRemoved(id: string, note: FilesRemoved): Promise<void>;
  /** Deletes finished runs; returns the IDs deleted. */
  deleteRuns(scope: ScopeFilter, ids: readonly string[]): Promise<Set<string>>;
  /** IDs of unfinished runs in these statuses, oldest first (restart recovery). */
  unfinishedRuns(statuses: readonly RunStatus[], nodeId?: string | null): Promise<Run[]>;
  childRuns(parentRunId: string): Promise<Run[]>;

  /** Records that this process is alive (by the database's clock: node-liveness.ts). */
  heartbeat(nodeId: string, now: number): Promise<void>;
  /** STARTED runs whose node is not `live` (has not beaten within its timeout, or never registered). */
  orphanedRuns(live: Liveness): Promise<Run[]>;
  /** QUEUED runs created before `cutoff`, oldest first, at most `limit` (lost-job sweep). */
  queuedBefore(cutoff: number, limit: number): Promise<Pick<Run, "id" | "elementType">[]>;
  /**
   * Runs STARTED by `nodeId` at or before `cutoff` (created so too), oldest first (then by ID), at
   * most `limit`; with `after`, only those after that run in this order (the next page).
   */
  startedOn(
    nodeId: string,
    cutoff: number,
    limit: number,
    after?: StartedAfter,
  ): Promise<Pick<Run, "id" | "elementType" | "createTime">[]>;
  /** Ends the run only while it is STARTED by `nodeId`; false when it is not (any more). */
  endStartedOn(id: string, nodeId: string, end: RunEnd): Promise<boolean>;
  /** Of `ids` (at most 500), those of runs that have ended (by their primary key). */
  endedAmong(ids: readonly string[]): Promise<string[]>;

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
  addErrorHandlerResult(runId: string, result: ErrorHandlerResult): Promise<void>;
  errorHandlerResults(runId: string): Promise<ErrorHandlerResult[]>;
  /** Drops the results of deleted runs; returns how many. */
  pruneErrorHandlerResults(): Promise<number>;

  close(): Promise<void>;
}

/** Plain SQL inside a store transaction (the shape pg-boss takes as its `db` option). */
export interface SqlExecutor {
  executeSql(text: string, values?: unknown[]): Promise<{ rows: unknown[] }>;
}
