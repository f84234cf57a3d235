import type { Scope } from "./store/model.ts";
import { createTurns } from "./turns.ts";

/** An app already has as many jobs waiting as it may (`waitingPerApp`): this one is not taken. */
export class TooManyWaiting extends Error {}

export interface TurnSlots {
  /** Runs `job` in a slot once one is free and it is the app's turn; see createTurnSlots. */
  run<T>(owner: Scope, job: () => Promise<T>): Promise<T>;
}

interface Waiting {
  owner: Scope;
  start(): void;
}

/**
 * At most `slots` jobs of every tenant at once, and at most `perApp` of one app, so that one
 * app's slow jobs (a notification to a host that never answers) hold back no other app's; the
 * jobs that wait take turns between apps and spaces (src/turns.ts). At most `waitingPerApp` of an
 * app wait: the next is refused with TooManyWaiting, so waiting jobs cannot grow without end.
 */
export function createTurnSlots(o: {
  slots: number;
  perApp: number;
  waitingPerApp: number;
}): TurnSlots {
  const turns = createTurns<Waiting>();
  const runningOf = new Map<string, number>();
  const waitingOf = new Map<string, number>();
  let running = 0;
  const add = (m: Map<string, number>, app: string, n: number) => {
    const v = (m.get(app) ?? 0) + n;
    if (v === 0) m.delete(app);
    else m.set(app, v);
  };
  const pump = () => {
    while (running < o.slots) {
      const next = turns.take((app) => (runningOf.get(app) ?? 0) < o.perApp);
      if (!next) return;
      add(waitingOf, next.owner.app, -1);
      next.start();
    }
  };
  return {
    run<T>(owner: Scope, job: () => Promise<T>): Promise<T> {
      if ((waitingOf.get(owner.app) ?? 0) >= o.waitingPerApp)
        return Promise.reject(new TooManyWaiting(`${o.waitingPerApp} of app ${owner.app} wait`));
      return new Promise<T>((resolve, reject) => {
        add(waitingOf, owner.app, 1);
        turns.add(owner, {
          owner,
          start() {
            running += 1;
            add(runningOf, owner.app, 1);
            // A job that throws before returning its promise fails as one that rejects: else its
            // slot stayed taken, and the throw went to whichever caller's pump started it.
            new Promise<T>((settled) => settled(job())).then(resolve, reject).finally(() => {
              running -= 1;
              add(runningOf, owner.app, -1);
              turns.settle(owner);
              pump();
            });
          },
        });
        pump();
      });
    },
  };
}
