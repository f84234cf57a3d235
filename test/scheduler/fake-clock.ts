/**
 * A fake Clock for tests: no sleeps, time moves only when the test says so.
 *
 * Like a real machine it keeps two times: the wall clock (`now()`) and a monotonic clock that
 * timers run on. `advance(ms)` moves both and fires due timers in order; `set(ms)` moves only the
 * wall clock (an NTP step or a manual date change), so pending timers still fire after their
 * original delay, not at a wall-clock time.
 */
import type { Clock, TimerHandle } from "../../src/clock.ts";

interface FakeTimer extends TimerHandle {
  readonly id: number;
  readonly dueMono: number;
  readonly fn: () => void;
}

export interface FakeClock extends Clock {
  /** Move time forward, firing due timers in due order (ties in creation order). */
  advance(ms: number): void;
  /** Async variant: also lets promise callbacks (e.g. rejected fires) run between timers. */
  advanceAsync(ms: number): Promise<void>;
  /** Jump the wall clock to `ms` (forward or back) without firing anything. */
  set(ms: number): void;
  /** Timers still pending. */
  pending(): number;
}

export function createFakeClock(startMs: number = Date.UTC(2025, 0, 1)): FakeClock {
  let wall = startMs;
  let mono = 0;
  let seq = 0;
  const timers = new Map<number, FakeTimer>();

  function nextDue(limitMono: number): FakeTimer | undefined {
    let best: FakeTimer | undefined;
    for (const t of timers.values()) {
      if (t.dueMono > limitMono) continue;
      if (!best || t.dueMono < best.dueMono || (t.dueMono === best.dueMono && t.id < best.id))
        best = t;
    }
    return best;
  }

  /** Move to the next due timer within `target`, fire it; false when none is left. */
  function step(target: number): boolean {
    const t = nextDue(target);
    if (!t) return false;
    timers.delete(t.id);
    wall += t.dueMono - mono;
    mono = t.dueMono;
    t.fn();
    return true;
  }

  function finish(target: number): void {
    wall += target - mono;
    mono = target;
  }

  return {
    now: () => wall,
    setTimeout(fn, ms) {
      const id = ++seq;
      const timer: FakeTimer = { id, dueMono: mono + Math.max(0, ms), fn, unref: () => timer };
      timers.set(id, timer);
      return timer;
    },
    clearTimeout(handle) {
      const t = handle as FakeTimer;
      if (timers.get(t.id) === t) timers.delete(t.id);
    },
    advance(ms) {
      const target = mono + ms;
      while (step(target)) {}
      finish(target);
    },
    async advanceAsync(ms) {
      const target = mono + ms;
      await flush();
      while (step(target)) await flush();
      finish(target);
    },
    set(ms) {
      wall = ms;
    },
    pending: () => timers.size,
  };
}

/** Let queued promise callbacks run (a few macrotask-free rounds). */
async function flush(): Promise<void> {
  for (let i = 0; i < 5; i++) await Promise.resolve();
}
