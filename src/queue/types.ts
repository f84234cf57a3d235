import type { NewRun, Scope, Store } from "../store/types.ts";

/** A durable run is already in the store; the queue only carries its ID to a worker. */
export interface RunJob {
  runId: string;
  kind: "flow" | "script";
  /**
   * The run's space: queued runs are handed out in turns across spaces (docs/run-limits.md).
   * Absent: the job takes its turn with the other jobs that have none.
   */
  scope?: Scope | undefined;
}

/** The key runs of one space take their turns under. */
export function spaceKey(scope: Scope | undefined): string {
  return scope ? JSON.stringify([scope.app, scope.space]) : "";
}

export interface RunQueue {
  /**
   * Throws SluiceError 429 when the bound is reached, unless `ignoreBound`: runs accepted before a
   * restart are re-queued whatever the bound, since refusing them would lose them.
   */
  enqueue(job: RunJob, opts?: { ignoreBound?: boolean }): Promise<void>;
  /**
   * Commits a QUEUED run and its job as one step (docs/cluster.md, "Nothing accepted is lost"):
   * once it resolves the run is certain to execute; when it throws, nothing was written. A queue
   * that is stopping refuses before writing. The bound is the caller's to check beforehand.
   */
  submit(
    run: NewRun,
    job: RunJob,
    store: Pick<Store, "insertRun" | "insertRunsWith">,
  ): Promise<void>;
  /**
   * Of these runs, the ones with a job that will still reach a worker: waiting, or claimed within
   * the last `claimedWithinMs` (a live worker starts what it claims at once; 0: only waiting
   * jobs). The local queue answers its waiting jobs (its jobs die with the process anyway).
   */
  liveJobs?(runIds: readonly string[], claimedWithinMs: number): Promise<Set<string>>;
  /** Starts delivering jobs to `handler`, at most `concurrency` at once. */
  start(handler: (job: RunJob) => Promise<void>): Promise<void>;
  depth(): number;
  /**
   * A slot to execute a job right now, when one is free and nothing is waiting (embedded mode:
   * a run that would never wait is committed as STARTED and skips the queue). Absent when the
   * backend cannot promise that this process takes the job.
   */
  reserve?(kind: RunJob["kind"]): QueueSlot | null;
  stop(): Promise<void>;
}

export interface QueueSlot {
  /** Runs `work` in the reserved slot; the slot frees itself when it settles. */
  run(work: () => Promise<unknown>): void;
  /** Gives the slot back unused. */
  release(): void;
}
