import type { Run } from "./model.ts";

/** A QUEUED limited run that may start now: a slot of its element is free for it. */
export type StartableRun = Pick<Run, "id" | "elementType" | "scope">;

/** The store's side of concurrency limits (docs/run-limits.md). */
export interface RunLimitStore {
  /**
   * QUEUED → STARTED for a limited run, only while the STARTED runs of its element plus the QUEUED
   * ones created before it are fewer than its limit; undefined otherwise (no slot for it, not
   * QUEUED, or not limited). Atomic against every other claim of the element, in every process.
   */
  claimLimited(id: string, startTime: number, nodeId: string | null): Promise<Run | undefined>;
  /**
   * The QUEUED limited runs (of one element, or of all) that fit in their element's free slots,
   * oldest first: the ones to hand a job when a slot frees or a sweep finds them without one.
   */
  startableRuns(elementId?: string, limit?: number): Promise<StartableRun[]>;
  /** How many QUEUED runs each app has, in every process (docs/run-limits.md, "Queued runs"). */
  queuedRunsByApp(): Promise<Map<string, number>>;
}
