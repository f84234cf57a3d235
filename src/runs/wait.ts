import type { Clock } from "../clock.ts";
import { type Run, type ScopeFilter, type Store, TERMINAL } from "../store/types.ts";
import type { RunEvents } from "./run-events.ts";

/** The reason a subscription is dropped: given, so no DOMException is made (a stack each time). */
const NEEDLESS = "needless";

/**
 * Reads the run, and while it is unfinished waits for its end event (no polling), up to `ms`.
 * Each read comes after the subscription: an end that lands between a read and a subscription
 * made after it (in a cluster the worker's NOTIFY can arrive while the read is on its way back)
 * would be missed, and the request would sit out its whole timeout. A subscription the read makes
 * needless is dropped at once. So a run that ends while waited for costs two reads, not three.
 * `gone`: the caller's client went (docs/live-progress.md, "Bounds"): the wait ends at once with
 * the run as last read, so nothing of the request stays behind for the rest of its timeout.
 */
export async function waitForRunEnd(
  deps: { store: Store; events: RunEvents; clock: Clock },
  scope: ScopeFilter,
  runId: string,
  ms: number,
  gone?: AbortSignal,
): Promise<Run | undefined> {
  if (ms <= 0 || gone?.aborted) return deps.store.getRun(scope, runId);
  const deadline = deps.clock.now() + ms;
  for (;;) {
    const remaining = deadline - deps.clock.now();
    const listening = new AbortController();
    const wake =
      remaining > 0 ? deps.events.waitFor(runId, remaining, listening.signal) : undefined;
    const leave = () => listening.abort(NEEDLESS);
    gone?.addEventListener("abort", leave);
    let run: Run | undefined;
    let woken: boolean;
    try {
      run = await deps.store.getRun(scope, runId);
      if (!wake || !run || TERMINAL.has(run.status)) {
        leave();
        return run;
      }
      woken = await wake;
    } catch (err) {
      leave();
      throw err;
    } finally {
      gone?.removeEventListener("abort", leave);
    }
    // The client went: nobody reads the answer, so nothing more is read for it.
    if (gone?.aborted) return run;
    // Not woken: the time is up, and this read is the answer.
    if (!woken) return deps.store.getRun(scope, runId);
  }
}
