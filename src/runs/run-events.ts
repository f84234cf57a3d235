import type { Clock } from "../clock.ts";

/**
 * Wakes requests waiting for a run to end. In embedded mode runs end in this process; in cluster
 * mode a LISTEN/NOTIFY bridge calls `notify` for runs that ended elsewhere. Nothing here polls.
 */
export interface RunEvents {
  /** Resolves true when `notify(runId)` is called, false after `ms`. */
  waitFor(runId: string, ms: number): Promise<boolean>;
  notify(runId: string): void;
  /** Outside subscribers (the cluster bridge publishes every local end). */
  onEnd(listener: (runId: string) => void): void;
  waiting(): number;
}

export function createRunEvents(deps: { clock: Clock }): RunEvents {
  const waiters = new Map<string, Set<(ended: boolean) => void>>();
  const listeners: ((runId: string) => void)[] = [];

  return {
    waitFor(runId, ms) {
      return new Promise<boolean>((resolve) => {
        let set = waiters.get(runId);
        if (!set) {
          set = new Set();
          waiters.set(runId, set);
        }
        const done = (ended: boolean) => {
          deps.clock.clearTimeout(timer);
          const s = waiters.get(runId);
          s?.delete(done);
          if (s?.size === 0) waiters.delete(runId);
          resolve(ended);
        };
        set.add(done);
        const timer = deps.clock.setTimeout(() => done(false), Math.max(0, ms));
      });
    },
    notify(runId) {
      const set = waiters.get(runId);
      if (set) for (const done of [...set]) done(true);
      for (const l of listeners) l(runId);
    },
    onEnd(listener) {
      listeners.push(listener);
    },
    waiting: () => waiters.size,
  };
}
