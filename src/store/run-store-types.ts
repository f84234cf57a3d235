/** The store's part for run records and the nodes that execute them (the Store in types.ts). */

import type {
  FilesRemoved,
  FinishedStatus,
  RerunLink,
  Run,
  RunStatus,
  ScopeFilter,
} from "./model.ts";
import type { Liveness } from "./node-liveness.ts";

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

/** Where a page of `startedOn` begins: after this run. */
export interface StartedAfter {
  createTime: number;
  id: string;
}

/** Plain SQL inside a store transaction (the shape pg-boss takes as its `db` option). */
export interface SqlExecutor {
  executeSql(text: string, values?: unknown[]): Promise<{ rows: unknown[] }>;
}

export interface RunStore {
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
  /**
   * A run terminated while it executed was ended CANCELED before its process was gone: adds the
   * output its executor read to that record, counted towards its app; false (nothing written)
   * unless the run is CANCELED with no output yet (docs/script-service.md).
   */
  keepOutput(id: string, out: { stdout: string; stderr: string }): Promise<boolean>;
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
  /**
   * Forgets the nodes that have not beaten within `kept.timeoutMs` (docs/cluster.md, "Heartbeats");
   * answers how many. A node's row is written at its start, so without this they pile up.
   */
  forgetNodes(kept: Liveness): Promise<number>;
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
}
