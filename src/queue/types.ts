/** A durable run is already in the store; the queue only carries its ID to a worker. */
export interface RunJob {
  runId: string;
  kind: "flow" | "script";
}

export interface RunQueue {
  /**
   * Throws SluiceError 429 when the bound is reached, unless `ignoreBound`: runs accepted before a
   * restart are re-queued whatever the bound, since refusing them would lose them.
   */
  enqueue(job: RunJob, opts?: { ignoreBound?: boolean }): Promise<void>;
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
