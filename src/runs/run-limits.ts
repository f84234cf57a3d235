import type { Logger } from "pino";
import type { RunJob, RunQueue } from "../queue/types.ts";
import type { StartableRun, Store } from "../store/types.ts";
import type { RunEvents } from "./run-events.ts";

/**
 * Wake-ups of runs waiting for a slot of their element (docs/run-limits.md). A limited run whose
 * claim finds no free slot stays QUEUED and its job is done; when a run of its element ends here,
 * the runs that now fit get a job again, oldest first. A job too many is harmless to the limit
 * (the claim starts a run once, and only while a slot is free), but costs a claim and a place in
 * the queue's bound: a run whose job still waits in the queue gets no second one.
 */
export interface LimitWakeups {
  /**
   * Gives a job to every waiting run that fits a free slot and has none on its way (the end that
   * should have woken it was recorded by a process that died first); recovery calls it each beat.
   */
  sweep(): Promise<number>;
}

interface WakeupDeps {
  store: Pick<Store, "startableRuns">;
  queue: Pick<RunQueue, "enqueue" | "liveJobs">;
  events: RunEvents;
  logger: Pick<Logger, "error" | "warn">;
  /** A claimed job older than this belongs to a dead worker (docs/cluster.md). */
  heartbeatTimeoutMs: number;
}

const kindOf = (run: Pick<StartableRun, "elementType">): RunJob["kind"] =>
  run.elementType === "PY" ? "script" : "flow";

export function createLimitWakeups(deps: WakeupDeps): LimitWakeups {
  const { events, logger } = deps;
  // Elements whose wake-up is under way, and those whose runs ended again meanwhile: one read at
  // a time per element, however many of its runs end together.
  const running = new Set<string>();
  const again = new Set<string>();
  const wake = (elementId: string): void => {
    if (running.has(elementId)) {
      again.add(elementId);
      return;
    }
    running.add(elementId);
    deps.store
      .startableRuns(elementId)
      // Only a job not yet fetched counts: a fetched one may have lost its claim to this end.
      .then((runs) => giveJobs(deps, runs, 0))
      .catch((err: unknown) => logger.error({ err, elementId }, "could not wake waiting runs"))
      .finally(() => {
        running.delete(elementId);
        if (again.delete(elementId)) wake(elementId);
      });
  };
  events.subscribe((e) => {
    if (e.type === "ended" && e.run?.runLimit != null && e.run.elementId !== undefined)
      wake(e.run.elementId);
  });
  return { sweep: () => sweep(deps) };
}

/** Sends a job for each run that has none on its way; answers how many were sent. */
async function giveJobs(
  deps: WakeupDeps,
  runs: readonly StartableRun[],
  claimedWithinMs: number,
): Promise<number> {
  const { queue } = deps;
  if (runs.length === 0) return 0;
  const live = queue.liveJobs
    ? await queue.liveJobs(
        runs.map((r) => r.id),
        claimedWithinMs,
      )
    : new Set<string>();
  let sent = 0;
  for (const run of runs) {
    if (live.has(run.id)) continue;
    await queue.enqueue(
      { runId: run.id, kind: kindOf(run), scope: run.scope },
      { ignoreBound: true },
    );
    sent++;
  }
  return sent;
}

async function sweep(deps: WakeupDeps): Promise<number> {
  const woken = await giveJobs(deps, await deps.store.startableRuns(), deps.heartbeatTimeoutMs);
  if (woken > 0) deps.logger.warn({ woken }, "gave a job again to runs waiting for a free slot");
  return woken;
}
