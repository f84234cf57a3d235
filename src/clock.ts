/** Time, injected so that cron, timeouts and waits are tested with a fake clock instead of sleeps. */
export interface Clock {
  now(): number;
  setTimeout(fn: () => void, ms: number): TimerHandle;
  clearTimeout(handle: TimerHandle): void;
}

export interface TimerHandle {
  unref?(): unknown;
}

/**
 * Node runs a timeout longer than 2^31 − 1 ms (24.8 days) after 1 ms, with a warning; a run or a
 * wait of `MAX_RUN_S` past that timed out at once. Such a timer is armed in steps instead.
 */
const LONGEST_MS = 2 ** 31 - 1;

class LongTimer implements TimerHandle {
  #timer: ReturnType<typeof setTimeout>;
  #unref = false;
  constructor(fn: () => void, ms: number) {
    this.#timer = this.#arm(fn, Date.now() + ms);
  }
  #arm(fn: () => void, at: number): ReturnType<typeof setTimeout> {
    const left = at - Date.now();
    const t = setTimeout(
      () => {
        if (left > LONGEST_MS) this.#timer = this.#arm(fn, at);
        else fn();
      },
      Math.min(Math.max(left, 0), LONGEST_MS),
    );
    if (this.#unref) t.unref();
    return t;
  }
  unref(): this {
    this.#unref = true;
    this.#timer.unref();
    return this;
  }
  clear(): void {
    clearTimeout(this.#timer);
  }
}

export const systemClock: Clock = {
  now: () => Date.now(),
  setTimeout: (fn, ms) => (ms > LONGEST_MS ? new LongTimer(fn, ms) : setTimeout(fn, ms)),
  clearTimeout: (h) =>
    h instanceof LongTimer ? h.clear() : clearTimeout(h as ReturnType<typeof setTimeout>),
};

/** A pause on `clock`, for polling loops that wait for the kernel or another process. */
export function sleep(clock: Clock, ms: number): Promise<void> {
  return new Promise((resolve) => clock.setTimeout(resolve, ms));
}
