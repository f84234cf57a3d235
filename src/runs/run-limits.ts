import type { Logger } from "pino";
import type { RunJob, RunQueue } from "../queue/types.ts";
import type { StartableRun, Store } from "../store/types.ts";
import type { RunEvents } from "./run-events.ts";

/**
 * Wake-ups of runs waiting for a slot of their element (docs/run-limits.md). A limited run whose
 * claim finds no free slot stays QUEUED and its job is done; when a run of its element ends here,
 * the runs that now fit get a job again, oldest first. A job too many is harmless: the claim
 * starts a run once, and only while a slot is free.
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
    enqueueStartable(deps, elementId)
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

async function enqueueStartable(deps: WakeupDeps, elementId: string): Promise<void> {
  for (const run of await deps.store.startableRuns(elementId)) {
    await deps.queue.enqueue(
      { runId: run.id, kind: kindOf(run), scope: run.scope },
      {
        ignoreBound: true,
      },
    );
  }
}

async function sweep(deps: WakeupDeps): Promise<number> {
  const { store, queue } = deps;
  const runs = await store.startableRuns();
  if (runs.length === 0) return 0;
  const live = queue.liveJobs
    ? await queue.liveJobs(
        runs.map((r) => r.id),
        deps.heartbeatTimeoutMs,
      )
    : new Set<string>();
  let woken = 0;
  for (const run of runs) {
    if (live.has(run.id)) continue;
    await queue.enqueue(
      { runId: run.id, kind: kindOf(run), scope: run.scope },
      { ignoreBound: true },
    );
    woken++;
  }
  if (woken > 0) deps.logger.warn({ woken }, "gave a job again to runs waiting for a free slot");
  return woken;
}
