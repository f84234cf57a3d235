import type { Clock } from "../clock.ts";
import { ErrorCode, SluiceError } from "../errors.ts";
import type { RunLimitStore } from "../store/run-limit-types.ts";

/** A read that found a limit reached is believed this long: a flood at it costs four reads a second. */
const RECOUNT_MS = 250;
/**
 * The store is read again once the runs admitted here since a read take this part of the room
 * that read left (half): two nodes admitting at once cannot pass a limit between their reads,
 * however fast a tenant sends, and a steady stream costs one read per half of the room.
 */
const SPREAD = 2;

export interface QueuedShare {
  /** Counts one more QUEUED run of the app, or refuses it with 429 when a limit is reached. */
  admit(app: string): Promise<void>;
}

/**
 * The QUEUED runs of the installation against `LIMIT_QUEUED_RUNS`, and of each app against
 * `LIMIT_QUEUED_RUNS_PER_APP` (docs/run-limits.md, "Queued runs"): one app's runs that wait
 * cannot take every place, whoever's runs they wait behind, and runs of a limited flow waiting
 * for their slot count too. The counts are the store's (every node's runs, whatever queue holds
 * their jobs) plus the runs admitted here since; they only grow between reads, so a count well
 * under its limit needs no read, and one that nears it is read again before a run is refused.
 * Runs being committed while a read runs may be missed by it: the limits can be passed by about
 * as many.
 */
export function createQueuedShare(deps: {
  store: Pick<RunLimitStore, "queuedRunsByApp">;
  clock: Clock;
  limits: { queuedRuns: number; queuedRunsPerApp: number; queuedRunsReserve: number };
}): QueuedShare {
  const { store, clock, limits } = deps;
  // The last places are for apps holding fewer than a tenth of them (docs/run-limits.md): full
  // shares of two apps (half each, by default) would otherwise leave no place for a third.
  const open = limits.queuedRuns - limits.queuedRunsReserve;
  const small = Math.max(1, Math.ceil(limits.queuedRunsReserve / 10));
  /** The store's counts at the last read, and the runs admitted here since. */
  let read = new Map<string, number>();
  let readTotal = 0;
  let since = new Map<string, number>();
  let sinceTotal = 0;
  let lastRecount = Number.NEGATIVE_INFINITY;
  let recounting: Promise<void> | null = null;
  // Until the first read the counts are unknown: a process started on a store full of QUEUED
  // runs (restart recovery) must not admit a whole share on top of them.
  let known = false;
  const recount = (): Promise<void> => {
    recounting ??= store
      .queuedRunsByApp()
      .then((counts) => {
        read = counts;
        readTotal = [...counts.values()].reduce((a, b) => a + b, 0);
        since = new Map();
        sinceTotal = 0;
        lastRecount = clock.now();
        known = true;
      })
      .finally(() => {
        recounting = null;
      });
    return recounting;
  };
  const readOf = (app: string) => read.get(app) ?? 0;
  const sinceOf = (app: string) => since.get(app) ?? 0;
  /** Admissions here since the read have taken their part of the room it left (or all of it). */
  const spent = (admitted: number, atRead: number, limit: number) =>
    admitted * SPREAD >= limit - atRead;
  const stale = (app: string) =>
    !known ||
    spent(sinceTotal, readTotal, open) ||
    spent(sinceOf(app), readOf(app), limits.queuedRunsPerApp);
  const inReserve = (total: number, own: number) =>
    limits.queuedRunsReserve > 0 && total >= open && own >= small;
  // Only other nodes' runs or runs starting change a count found full: other apps' admissions
  // here do not, so they do not make a refused app's read stale.
  const standing = (app: string) =>
    known &&
    (readTotal >= limits.queuedRuns ||
      readOf(app) >= limits.queuedRunsPerApp ||
      inReserve(readTotal, readOf(app))) &&
    clock.now() - lastRecount < RECOUNT_MS;
  return {
    async admit(app) {
      if (stale(app) && (recounting || !standing(app))) await recount();
      if (readTotal + sinceTotal >= limits.queuedRuns)
        throw new SluiceError(ErrorCode.TOO_MANY, [`queue holds ${limits.queuedRuns} runs`]);
      if (readOf(app) + sinceOf(app) >= limits.queuedRunsPerApp)
        throw new SluiceError(ErrorCode.TOO_MANY, [
          `app ${app} holds ${limits.queuedRunsPerApp} queued runs (LIMIT_QUEUED_RUNS_PER_APP)`,
        ]);
      if (inReserve(readTotal + sinceTotal, readOf(app) + sinceOf(app)))
        throw new SluiceError(ErrorCode.TOO_MANY, [
          `queue holds ${readTotal + sinceTotal} runs; its last ${limits.queuedRunsReserve} places are kept for apps with fewer than ${small} queued runs (LIMIT_QUEUED_RUNS_RESERVE)`,
        ]);
      since.set(app, sinceOf(app) + 1);
      sinceTotal += 1;
    },
  };
}
