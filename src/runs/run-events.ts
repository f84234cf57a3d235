import type { Clock } from "../clock.ts";
import type { Configure } from "../flows/graph.ts";
import type { Progress } from "../progress/types.ts";
import type { NewRun, RunEnd } from "../store/types.ts";

/**
 * What a subscriber may need of a run without reading it back from the store. `webhooks` is
 * there when the publisher held the whole record (null: the run calls none, docs/webhooks.md).
 */
export type RunFacts = Pick<
  NewRun,
  "id" | "elementType" | "triggerType" | "createTime" | "startTime" | "webhooks"
> &
  /** The element and its limit: an end frees a slot of it (docs/run-limits.md). */
  Partial<Pick<NewRun, "elementId" | "runLimit">>;

/**
 * What the run lifecycle tells its observers (docs/architecture.md, "Run events"). Every event is
 * a fact already recorded in the store by this process: `created` once the record is committed
 * (QUEUED or STARTED; a write-behind run that ended within its grace is created and ended at
 * once), `started` when a queued run is claimed here, `ended` when this process recorded the end,
 * `sentinel` when a flow run passes its sentinel limit and goes on. `progress` is not recorded: a
 * node started or ended, or a script printed, while the run executes here (docs/live-progress.md).
 */
export type RunEvent =
  | { type: "created"; run: RunFacts }
  | { type: "started"; runId: string; startTime: number }
  | {
      type: "ended";
      runId: string;
      end: RunEnd;
      /** Absent when the ending process did not hold the record (recovery, shutdown). */
      run?: RunFacts | undefined;
      /** A flow run's release configuration (error handlers); absent for script tasks. */
      configure?: Configure | undefined;
    }
  | { type: "sentinel"; runId: string; configure: Configure; seconds: number }
  | { type: "progress"; runId: string; progress: Progress };

export interface RunEvents {
  /** Tells every subscriber; an `ended` event also wakes waiters and `onEnd` listeners. */
  publish(event: RunEvent): void;
  subscribe(listener: (event: RunEvent) => void): void;
  /**
   * A run ended without this process knowing how (another node, through the cluster bridge):
   * wakes waiters and `onEnd` listeners; subscribers are not told, the ending process told its own.
   */
  notify(runId: string): void;
  /** Any end, local or relayed: the cluster bridge publishes them, the lifecycle stops local work. */
  onEnd(listener: (runId: string) => void): void;
  /**
   * Resolves true when the run's end is published or notified, false after `ms` or once `signal`
   * aborts (the waiter then goes at once, timer and all).
   */
  waitFor(runId: string, ms: number, signal?: AbortSignal): Promise<boolean>;
  waiting(): number;
}

/**
 * In-process publish/subscribe for run events. Nothing here polls or touches the store. A
 * subscriber that throws is reported to `onError` and does not stop the others.
 */
export function createRunEvents(deps: {
  clock: Clock;
  onError?: (err: unknown, event: RunEvent) => void;
}): RunEvents {
  const waiters = new Map<string, Set<(ended: boolean) => void>>();
  const endListeners: ((runId: string) => void)[] = [];
  const subscribers: ((event: RunEvent) => void)[] = [];

  function ended(runId: string): void {
    const set = waiters.get(runId);
    if (set) for (const done of [...set]) done(true);
    for (const l of endListeners) l(runId);
  }

  return {
    publish(event) {
      for (const s of subscribers) {
        try {
          s(event);
        } catch (err) {
          deps.onError?.(err, event);
        }
      }
      if (event.type === "ended") ended(event.runId);
    },
    subscribe(listener) {
      subscribers.push(listener);
    },
    notify: ended,
    onEnd(listener) {
      endListeners.push(listener);
    },
    waitFor(runId, ms, signal) {
      return new Promise<boolean>((resolve) => {
        if (signal?.aborted) return resolve(false);
        let set = waiters.get(runId);
        if (!set) {
          set = new Set();
          waiters.set(runId, set);
        }
        const done = (hit: boolean) => {
          deps.clock.clearTimeout(timer);
          signal?.removeEventListener("abort", abort);
          const s = waiters.get(runId);
          s?.delete(done);
          if (s?.size === 0) waiters.delete(runId);
          resolve(hit);
        };
        const abort = () => done(false);
        set.add(done);
        signal?.addEventListener("abort", abort, { once: true });
        const timer = deps.clock.setTimeout(() => done(false), Math.max(0, ms));
      });
    },
    waiting: () => waiters.size,
  };
}
