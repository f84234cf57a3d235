import type { Clock } from "../clock.ts";
import { ErrorCode, SluiceError } from "../errors.ts";
import type { RunLimitStore } from "../store/run-limit-types.ts";

/** A read that found a limit reached is read again after this long (or after an admission). */
const RECOUNT_MS = 250;

export interface QueuedShare {
  /** Counts one more QUEUED run of the app, or refuses it with 429 when a limit is reached. */
  admit(app: string): Promise<void>;
}

/**
 * The QUEUED runs of the installation against `LIMIT_QUEUED_RUNS`, and of each app against
 * `LIMIT_QUEUED_RUNS_PER_APP` (docs/run-limits.md, "Queued runs"): one app's runs that wait
 * cannot take every place, whoever's runs they wait behind, and runs of a limited flow waiting
 * for their slot count too. The counts are the store's (every node's runs, whatever queue holds
 * their jobs) plus the runs admitted here since; they only grow between reads, so a count under
 * its limit needs no read, and a count at it is read again before a run is refused. Runs being
 * committed while a read runs may be missed by it: the limits can be passed by about as many.
 */
export function createQueuedShare(deps: {
  store: Pick<RunLimitStore, "queuedRunsByApp">;
  clock: Clock;
  limits: { queuedRuns: number; queuedRunsPerApp: number };
}): QueuedShare {
  const { store, clock, limits } = deps;
  let byApp = new Map<string, number>();
  let total = 0;
  let lastRecount = Number.NEGATIVE_INFINITY;
  /** Runs admitted since the last read: a count made full by them is read again at once. */
  let sinceRecount = 0;
  let recounting: Promise<void> | null = null;
  // Until the first read the counts are unknown: a process started on a store full of QUEUED
  // runs (restart recovery) must not admit a whole share on top of them.
  let known = false;
  const recount = (): Promise<void> => {
    recounting ??= store
      .queuedRunsByApp()
      .then((counts) => {
        byApp = counts;
        total = [...counts.values()].reduce((a, b) => a + b, 0);
        lastRecount = clock.now();
        sinceRecount = 0;
        known = true;
      })
      .finally(() => {
        recounting = null;
      });
    return recounting;
  };
  const ofApp = (app: string) => byApp.get(app) ?? 0;
  const full = (app: string) =>
    !known || total >= limits.queuedRuns || ofApp(app) >= limits.queuedRunsPerApp;
  return {
    async admit(app) {
      // A read that found the limit reached stands for RECOUNT_MS: a flood at the limit costs
      // four reads a second, not one per refused run.
      const stale = sinceRecount > 0 || clock.now() - lastRecount >= RECOUNT_MS;
      if (full(app) && (recounting || stale)) await recount();
      if (total >= limits.queuedRuns)
        throw new SluiceError(ErrorCode.TOO_MANY, [`queue holds ${limits.queuedRuns} runs`]);
      if (ofApp(app) >= limits.queuedRunsPerApp)
        throw new SluiceError(ErrorCode.TOO_MANY, [
          `app ${app} holds ${limits.queuedRunsPerApp} queued runs (LIMIT_QUEUED_RUNS_PER_APP)`,
        ]);
      byApp.set(app, ofApp(app) + 1);
      total += 1;
      sinceRecount += 1;
    },
  };
}
