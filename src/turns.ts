/**
 * The order in which tenants' jobs waiting for a shared worker get one: the expression processes
 * (docs/security.md, "Flow expressions") and the SQLite store's reading thread ("Monitoring
 * reads"). The app served least recently first, then, within it, its space served least
 * recently, then that space's oldest job. Two levels because an app may use any number of spaces:
 * with turns per space, an app that spread its flows over ten spaces would get ten turns for each
 * of another app's.
 */
import type { Scope } from "./store/model.ts";

interface Level {
  /** When it was last given a job (a count of jobs given): the smallest goes next. */
  served: number;
  /** Its jobs given out and not yet settled. */
  running: number;
}
interface Space<T> extends Level {
  queue: T[];
}
interface App<T> extends Level {
  spaces: Map<string, Space<T>>;
  waiting: number;
}

export interface Turns<T> {
  /** A job waits last in its space's queue; `again`: first, with the turn it was given back. */
  add(owner: Scope, job: T, again?: boolean): void;
  /** The next job (of an app `may` allows), now counted as running; undefined when none waits. */
  take(may?: (app: string) => boolean): T | undefined;
  /** A job given out is over: its owner is forgotten once it has nothing waiting or running. */
  settle(owner: Scope): void;
  /** Every waiting job, removed. */
  drain(): T[];
  /** How many jobs wait. */
  waiting(): number;
}

function least<E extends Level>(
  m: Map<string, E>,
  waits: (e: E, key: string) => boolean,
): E | undefined {
  let best: E | undefined;
  for (const [key, e] of m) if (waits(e, key) && (!best || e.served < best.served)) best = e;
  return best;
}

export function createTurns<T extends object>(): Turns<T> {
  const apps = new Map<string, App<T>>();
  let given = 0;
  let waiting = 0;
  // What each level's `served` was before a job was given out: given back if the job comes back.
  const priors = new WeakMap<T, [app: number, space: number]>();
  const levels = (owner: Scope): [App<T>, Space<T>] => {
    const app = apps.get(owner.app) ?? { spaces: new Map(), waiting: 0, running: 0, served: 0 };
    apps.set(owner.app, app);
    const space = app.spaces.get(owner.space) ?? { queue: [], running: 0, served: 0 };
    app.spaces.set(owner.space, space);
    return [app, space];
  };
  return {
    add(owner, job, again = false) {
      const [app, space] = levels(owner);
      app.waiting += 1;
      waiting += 1;
      if (!again) {
        space.queue.push(job);
        return;
      }
      space.queue.unshift(job);
      const [a, s] = priors.get(job) ?? [0, 0];
      app.served = Math.min(app.served, a);
      space.served = Math.min(space.served, s);
    },
    take(may) {
      // `may`: whether an app may be given one now (an app at its share waits for its turn).
      const app = least(apps, (a, key) => a.waiting > 0 && (may?.(key) ?? true));
      const space = app && least(app.spaces, (s) => s.queue.length > 0);
      const job = space?.queue.shift();
      if (!app || !space || !job) return undefined;
      priors.set(job, [app.served, space.served]);
      given += 1;
      app.served = given;
      space.served = given;
      app.waiting -= 1;
      waiting -= 1;
      app.running += 1;
      space.running += 1;
      return job;
    },
    settle(owner) {
      const app = apps.get(owner.app);
      const space = app?.spaces.get(owner.space);
      if (!app || !space) return;
      app.running -= 1;
      space.running -= 1;
      if (space.running === 0 && space.queue.length === 0) app.spaces.delete(owner.space);
      if (app.running === 0 && app.waiting === 0) apps.delete(owner.app);
    },
    drain() {
      const all = [...apps.values()].flatMap((a) => [...a.spaces.values()].flatMap((s) => s.queue));
      apps.clear();
      waiting = 0;
      return all;
    },
    waiting: () => waiting,
  };
}
