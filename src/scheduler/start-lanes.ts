import { createTurnSlots } from "../turn-slots.ts";

/**
 * The run starts of fired ticks, shared by every app (docs/scheduler.md, "Apps share the
 * scheduler"). Starts go through a few lanes, so thousands due at once only queue up here, not in
 * the store. One app holds at most half of them, so its starts hanging (or merely slow) always
 * leave lanes for the others; waiting apps take free lanes in turn (src/turn-slots.ts), so
 * another app's tick never waits behind a whole flood of one app's. And an app has at most `perApp` ticks on their way
 * (claimed or being claimed, waiting, starting, retrying after a 429): beyond that its ticks are
 * skipped, not claimed, instead of piling up in memory faster than they can start.
 */

const LANES = 16;
const LANES_PER_APP = LANES / 2;

export interface StartLanes {
  /** Counts a tick of the app on its way, or answers false when the app already has `perApp`. */
  enter(app: string): boolean;
  /** The tick is done with (started, refused for good, failed, or not won). */
  leave(app: string): void;
  /** Runs `fn` in a lane of the app, waiting for one. */
  run(app: string, fn: () => Promise<unknown>): Promise<void>;
}

export function createStartLanes(perApp: number): StartLanes {
  const onTheirWay = new Map<string, number>();
  // Waiting starts are bounded by `enter` above, so the slots need no bound of their own.
  const lanes = createTurnSlots({
    slots: LANES,
    perApp: LANES_PER_APP,
    waitingPerApp: Number.POSITIVE_INFINITY,
  });
  return {
    enter(app) {
      const n = onTheirWay.get(app) ?? 0;
      if (n >= perApp) return false;
      onTheirWay.set(app, n + 1);
      return true;
    },
    leave(app) {
      const n = (onTheirWay.get(app) ?? 1) - 1;
      if (n > 0) onTheirWay.set(app, n);
      else onTheirWay.delete(app);
    },
    async run(app, fn) {
      // Turns between apps (src/turn-slots.ts); the scheduler's lanes do not tell spaces apart.
      await lanes.run({ app, space: "" }, fn);
    },
  };
}
