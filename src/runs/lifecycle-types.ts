import type { Logger } from "pino";
import type { Clock } from "../clock.ts";
import type { ErrorCodeValue } from "../errors.ts";
import type { RunJob, RunQueue } from "../queue/types.ts";
import type { NewRun, Run, ScopeFilter, Store } from "../store/types.ts";
import type { StoredQuota } from "../stored-quota.ts";
import type { RunsHere } from "./orphans.ts";
import type { Execution } from "./outcome.ts";
import type { QueuedShare } from "./queued-share.ts";
import type { RunEvents } from "./run-events.ts";
import type { RunMemory } from "./run-memory.ts";

/**
 * The lifecycle's contract (docs/architecture.md, "One lifecycle"): what an executor provides,
 * what the lifecycle is built from and what it offers. lifecycle.ts implements it and exports
 * these names too.
 */

/** What every kind of run request carries; the rest is the executor's. */
export interface RunRequest {
  parameter: unknown;
}

/** What a run needs to execute: its record as created or as read back from the store. */
export type ExecRun = NewRun | Run;

/**
 * The thing that executes one kind of run (docs/architecture.md, "One lifecycle"): flow runs and
 * script tasks are two of these. The lifecycle owns statuses, queueing, waits and limits.
 */
export interface RunExecutor<Req extends RunRequest> {
  kind: RunJob["kind"];
  /** Throws when this node takes no run of this kind at all (a node without its sandbox). */
  admit?(): void;
  /** Checks the request and builds the run's record; writes nothing. */
  prepare(req: Req, status: "QUEUED" | "STARTED", inProcess: boolean): Promise<NewRun>;
  /**
   * Executes a STARTED run. Aborting `signal` (its reason a RunStop) asks it to stop; it settles
   * once its work stopped. A throw counts as FAILURE with the error's message.
   */
  execute(run: ExecRun, parameter: unknown, signal: AbortSignal): Promise<Execution>;
}

export interface LifecycleDeps {
  store: Store;
  events: RunEvents;
  clock: Clock;
  logger: Logger;
  nodeId: string;
  limits: { maxRunS: number; maxWaitS: number; resultBytes: number };
  queue: Pick<RunQueue, "reserve">;
  /** The places for QUEUED runs, shared by every lifecycle of the process (queued-share.ts). */
  queued: QueuedShare;
  /** What executing runs hold in memory, shared by every lifecycle of the process. */
  memory: RunMemory;
  /** The runs this process holds STARTED, shared by every lifecycle of the process (orphans.ts). */
  here: RunsHere;
  /** LIMIT_STORED_BYTES_PER_APP (stored-quota.ts); absent: no bound. */
  stored?: StoredQuota | undefined;
  /** Commits a QUEUED run and hands its job to the queue: one call, so it can be one transaction. */
  commitQueued(run: NewRun, job: RunJob): Promise<void>;
  /** The queue delivers this process's jobs back to it (embedded), so queued records can be kept. */
  queueIsLocal: boolean;
  /** The error a missing run is answered with (28020002 for runs, 28030003 for tasks). */
  notFound: ErrorCodeValue;
}

/** A run-sync's answer: the run as the store records it when the answer is made. */
export interface SyncRun {
  run: Run;
  /** The wait elapsed with the run unfinished, and `terminateOnTimeout` stopped it. */
  killedOnTimeout: boolean;
}

export interface SyncWait {
  /** Seconds; absent or 0: until the run ends. Always bounded by MAX_WAIT_S. */
  timeoutS?: number | undefined;
  terminateOnTimeout?: boolean | undefined;
}

export interface RunLifecycle<Req extends RunRequest> {
  /** Commits the run and queues it (or executes it here when `inProcess`); answers its ID. */
  start(req: Req, opts?: { inProcess?: boolean }): Promise<string>;
  /** Executes here and waits (docs/architecture.md, "Run-sync"). */
  runSync(req: Req, wait: SyncWait): Promise<SyncRun>;
  /** The queue's worker side: executes a QUEUED run unless it was ended meanwhile. */
  execute(runId: string): Promise<void>;
  /**
   * The run once it ended, or as it stands after `timeoutS` (bounded by MAX_WAIT_S), or at once
   * when `gone` aborts (the caller's client went).
   */
  waitForEnd(
    scope: ScopeFilter,
    runId: string,
    timeoutS: number,
    gone?: AbortSignal,
  ): Promise<Run | undefined>;
  terminate(run: Run): Promise<boolean>;
}
