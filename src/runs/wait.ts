import type { Clock } from "../clock.ts";
import { type Run, type ScopeFilter, type Store, TERMINAL } from "../store/types.ts";
import type { RunEvents } from "./run-events.ts";

/**
 * Reads the run, and while it is unfinished waits for its end event (no polling), up to `ms`.
 * Re-reading after each wake closes the gap between the first read and the subscription.
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
    const woke = await deps.events.waitFor(runId, remaining);
    run = await deps.store.getRun(scope, runId);
    if (!woke) break;
  }
  return run;
}
