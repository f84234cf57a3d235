import type { Clock } from "../clock.ts";
import { type Run, type ScopeFilter, type Store, TERMINAL } from "../store/types.ts";
import type { RunEvents } from "./run-events.ts";

/**
 * Reads the run, and while it is unfinished waits for its end event (no polling), up to `ms`.
 * Each wait subscribes first and then reads again: an end that lands between a read and the
 * subscription (in a cluster the worker's NOTIFY can arrive while the read is on its way back)
 * would otherwise be missed, and the request would sit out its whole timeout. A subscription left
 * behind when that second read finds the run ended lapses on its own timer.
 */
export async function waitForRunEnd(
  deps: { store: Store; events: RunEvents; clock: Clock },
  scope: ScopeFilter,
  runId: string,
  ms: number,
): Promise<Run | undefined> {
  let run = await deps.store.getRun(scope, runId);
  if (!run || TERMINAL.has(run.status) || ms <= 0) return run;
  const deadline = deps.clock.now() + ms;
  while (run && !TERMINAL.has(run.status)) {
    const remaining = deadline - deps.clock.now();
    if (remaining <= 0) break;
    const wake = deps.events.waitFor(runId, remaining);
    run = await deps.store.getRun(scope, runId);
    if (!run || TERMINAL.has(run.status)) break;
    const woke = await wake;
    run = await deps.store.getRun(scope, runId);
    if (!woke) break;
  }
  return run;
}
