import type { Clock } from "../clock.ts";
import { type Child, destroy, killGroup } from "./zygote-child.ts";
import { ReapedChildren } from "./zygote-reaped.ts";

/** Exit code, -signal, or why nobody will ever know. */
export type ExitStatus = number | "zygote-died" | "unknown";

interface Busy {
  status?: ExitStatus;
  waiters: Array<(s: ExitStatus) => void>;
}

export interface TaskEndsDeps {
  clock: Clock;
  /** Whether the zygote runs and takes commands. */
  listening: () => boolean;
  /** A command line to the running zygote. */
  write: (line: string) => void;
}

/**
 * How the tasks of the zygote's taken children ended, decided outside them: each child's exit
 * status as the zygote reaped it (`x`), and the sweep of each task's uid (`k`, answered by `w`, or
 * with a pid namespace per child its reaping; docs/security.md, "The end of a task").
 */
export class TaskEnds {
  readonly #d: TaskEndsDeps;
  #busy = new Map<number, Busy>();
  #sweeps = new Map<number, Array<(confirmed: boolean) => void>>();
  /** Set when the zygote's children each have a pid namespace of their own (`ready … pidns`). */
  #reaped: ReapedChildren | undefined;

  constructor(d: TaskEndsDeps) {
    this.#d = d;
  }

  /** The running zygote said ready, its children each in a pid namespace of their own or not. */
  ready(pidns: boolean): void {
    this.#reaped = pidns ? new ReapedChildren(this.#d.clock) : undefined;
  }

  /** `c PID`: a new child (what was recorded of an earlier one with its pid is not about it). */
  born(pid: number): void {
    this.#reaped?.born(pid);
  }

  /** Child `pid` was handed to a task. */
  taken(pid: number): void {
    this.#busy.set(pid, { waiters: [] });
  }

  /** `x PID STATUS`. */
  exited(pid: number, status: number): void {
    const busy = this.#busy.get(pid);
    if (busy) settle(busy, status);
    this.#reaped?.reaped(pid);
  }

  /** Whether the zygote that forked taken child `c` died (so did `c`, or it is being killed). */
  lost(c: Child): boolean {
    return this.#busy.get(c.pid)?.status === "zygote-died";
  }

  /** A taken child that will not get its task after all: it is killed (unless known dead). */
  discard(c: Child): void {
    destroy(c);
    if (this.#busy.get(c.pid)?.status === undefined) killGroup(c.pid);
    this.#busy.delete(c.pid);
  }

  /** Resolves when the zygote reaped `pid` (or cannot tell anymore). */
  exitStatus(pid: number, timeoutMs: number): Promise<ExitStatus> {
    const busy = this.#busy.get(pid);
    if (!busy) return Promise.resolve("unknown");
    if (busy.status !== undefined) return Promise.resolve(busy.status);
    return new Promise((resolve) => {
      const t = this.#d.clock.setTimeout(() => resolve("unknown"), timeoutMs);
      busy.waiters.push((s) => {
        this.#d.clock.clearTimeout(t);
        resolve(s);
      });
    });
  }

  release(pid: number): void {
    this.#busy.delete(pid);
  }

  /**
   * Resolves true once nothing of `uid` is left running: the zygote checks after the task's
   * child `pid` is reaped, and kills whatever the task left (docs/security.md). False: it could
   * not be confirmed (the zygote died, or leftovers outlived the sweep); the uid must not be
   * handed to another task.
   */
  sweep(uid: number, pid: number): Promise<boolean> {
    if (!this.#d.listening()) return Promise.resolve(false);
    // With a pid namespace per child, its reaping is the confirmation; the zygote is asked only
    // when that does not come within a second (a task process stuck in the kernel).
    if (this.#reaped && pid > 0)
      return this.#reaped
        .wait(pid, 1000)
        .then((reaped) => (reaped === undefined ? this.#ask(uid, pid) : reaped));
    return this.#ask(uid, pid);
  }

  #ask(uid: number, pid: number): Promise<boolean> {
    if (!this.#d.listening()) return Promise.resolve(false);
    return new Promise((resolve) => {
      const waiting = this.#sweeps.get(uid);
      if (waiting) waiting.push(resolve);
      else this.#sweeps.set(uid, [resolve]);
      this.#d.write(`k ${uid} ${pid}\n`);
    });
  }

  /** `w UID 0|1`. */
  swept(uid: number, confirmed: boolean): void {
    const waiting = this.#sweeps.get(uid);
    this.#sweeps.delete(uid);
    for (const w of waiting ?? []) w(confirmed);
  }

  /** The zygote died: running tasks lose their reaper, so they are killed and told why. */
  zygoteDied(): void {
    for (const [pid, busy] of this.#busy) {
      killGroup(pid);
      settle(busy, "zygote-died");
    }
    for (const uid of [...this.#sweeps.keys()]) this.swept(uid, false);
    this.#reaped?.clear();
    this.#reaped = undefined;
  }

  /** At close: every taken child's group is killed. */
  killAll(): void {
    for (const pid of this.#busy.keys()) killGroup(pid);
  }
}

function settle(busy: Busy, status: ExitStatus): void {
  busy.status = status;
  for (const w of busy.waiters.splice(0)) w(status);
}
