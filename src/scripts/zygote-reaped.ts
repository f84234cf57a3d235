import { type Clock, systemClock } from "../clock.ts";

/**
 * Which children the zygote reaped, for a zygote whose children are each the first process of a
 * pid namespace of their own (its `ready … pidns`). Linux reaps such a process only once every
 * other process of its namespace is gone, and a task can neither leave that namespace nor enter
 * another: the `x` report of a task's child is then the confirmation that nothing of the task is
 * left, with no `k` round trip through the zygote (docs/security.md, "The end of a task").
 */
export class ReapedChildren {
  /** Reaped since their last `c` report; a pid seen again in `c` is a new child. */
  readonly #reaped = new Set<number>();
  readonly #waiters = new Map<number, Array<(reaped: boolean | undefined) => void>>();
  /** Records kept at most: a dropped one only means a `k` after the wait below. */
  static readonly KEEP = 4096;
  readonly #clock: Clock;

  /** The system clock when a test builds one alone. */
  constructor(clock: Clock = systemClock) {
    this.#clock = clock;
  }

  /** `c PID`: a new child has this pid; what was recorded of an earlier one is not about it. */
  born(pid: number): void {
    this.#reaped.delete(pid);
  }

  /** `x PID`. */
  reaped(pid: number): void {
    const waiting = this.#waiters.get(pid);
    if (waiting) {
      this.#waiters.delete(pid);
      for (const w of waiting) w(true);
      return;
    }
    this.#reaped.add(pid);
    if (this.#reaped.size > ReapedChildren.KEEP) {
      const oldest = this.#reaped.values().next().value;
      if (oldest !== undefined) this.#reaped.delete(oldest);
    }
  }

  /**
   * Resolves true once child `pid` is reaped, undefined when that has not happened within `ms`
   * (the caller then asks the zygote), false when the zygote died meanwhile (nobody can tell).
   */
  wait(pid: number, ms: number): Promise<boolean | undefined> {
    if (this.#reaped.delete(pid)) return Promise.resolve(true);
    return new Promise((resolve) => {
      const timer = this.#clock.setTimeout(() => {
        const waiting = this.#waiters.get(pid)?.filter((w) => w !== done);
        if (waiting?.length) this.#waiters.set(pid, waiting);
        else this.#waiters.delete(pid);
        resolve(undefined);
      }, ms);
      const done = (reaped: boolean | undefined) => {
        this.#clock.clearTimeout(timer);
        resolve(reaped);
      };
      this.#waiters.set(pid, [...(this.#waiters.get(pid) ?? []), done]);
    });
  }

  /** The zygote died: every wait ends with false, and its records are forgotten. */
  clear(): void {
    const waiting = [...this.#waiters.values()].flat();
    this.#waiters.clear();
    this.#reaped.clear();
    for (const w of waiting) w(false);
  }
}
