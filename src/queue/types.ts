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
  stop(): Promise<void>;
}
