import type { Clock } from "../clock.ts";
import type { Logger } from "./python-runner-sandbox.ts";
import { type Child, destroy, killGroup, openChild } from "./zygote-child.ts";
import { type ExitStatus, TaskEnds } from "./zygote-ends.ts";
import { type Report, ZygoteProcess } from "./zygote-process.ts";

export type { Child } from "./zygote-child.ts";
export type { ExitStatus } from "./zygote-ends.ts";

export interface ZygoteOptions {
  command: string;
  args: string[];
  env: Record<string, string>;
  prefork: number;
  logger: Logger;
  clock: Clock;
  /**
   * The host uid of every child when reported, for a zygote whose reports are not trusted (a
   * preloading one's root): a pid of another uid is not taken for its child.
   */
  childUid?: number;
  /**
   * A zygote that runs a package's code reports its pid before it does (`hold PID`) and goes on
   * once this resolves (the runner puts it in a cgroup of its own); the function it resolves with
   * is called once that zygote process has exited. A rejection kills the zygote.
   */
  onHold?: (pid: number) => Promise<() => Promise<unknown>>;
  /** A new child, still idle (the runner puts it in its cgroup). */
  onChild?: (pid: number) => void;
  /** An idle child that will never get a task is gone (or going: its group was killed). */
  onIdleGone?: (pid: number) => void;
  /** A zygote process not ready within this is stopped (SCRIPT_ENV_START_TIMEOUT_MS). */
  startMs?: number;
  /**
   * The same zygote preloading nothing: once the pool has started, a process that sends a report
   * out of turn or is not ready within `startMs` is followed by one started with these arguments,
   * and the pool stays so (docs/security.md, "Preloading").
   */
  plainArgs?: string[];
}

interface Waiter {
  resolve: (c: Child) => void;
  /** The zygote could not fork its child (why: the system's words, e.g. a limit reached). */
  reject: (err: Error) => void;
}

/** A zygote process that lived this long after ready died of something new, not a loop. */
const STABLE_MS = 60_000;

/**
 * Owns the zygote process and its children: keeps `prefork` idle children connected, hands
 * them out in FIFO order, relays exit statuses, and restarts the zygote if it dies.
 */
export class ZygotePool {
  readonly #o: ZygoteOptions;
  #proc: ZygoteProcess | undefined;
  #zygotePid: number | undefined;
  #idle: Child[] = [];
  #waiters: Waiter[] = [];
  #closing = false;
  #restarts = 0;
  /** Some zygote process of this pool said ready (it started). */
  #started = false;
  /** A process failed while preloading: every later one runs with `plainArgs`. */
  #plain = false;
  /** When the running zygote process said ready. */
  #readyAt = 0;
  readonly #ends: TaskEnds;

  constructor(o: ZygoteOptions) {
    this.#o = o;
    this.#ends = new TaskEnds({
      clock: o.clock,
      listening: () => this.#zygotePid !== undefined && this.#proc?.writable === true,
      write: (line) => this.#proc?.write(line),
    });
  }

  get idle(): number {
    return this.#idle.length;
  }
  get zygotePid(): number | undefined {
    return this.#zygotePid;
  }

  async start(): Promise<void> {
    await this.#spawn();
  }

  #spawn(): Promise<void> {
    const { command, env, logger, clock, startMs, onHold } = this.#o;
    const proc: ZygoteProcess = new ZygoteProcess({
      command,
      env,
      logger,
      clock,
      startMs,
      onHold,
      args: this.#plain && this.#o.plainArgs ? this.#o.plainArgs : this.#o.args,
      onReady: (pid, pidns) => this.#markReady(pid, pidns),
      onFailed: () => this.#failed(),
      onReport: (r) => this.#onReport(r),
      onExit: (code, signal) => {
        if (this.#proc === proc) this.#onZygoteExit(proc, code, signal);
      },
    });
    this.#proc = proc;
    return proc.ready;
  }

  /**
   * A zygote process that sent a report out of turn or was not ready in time is being killed.
   * Once the pool has started (tasks may wait for its children), the next process preloads
   * nothing.
   */
  #failed(): void {
    if (this.#started) this.#preloadNoMore("failed while preloading");
  }

  #preloadNoMore(why: string): void {
    if (!this.#o.plainArgs || this.#plain) return;
    this.#plain = true;
    this.#restarts = 0;
    this.#o.logger.warn({}, `an environment's zygote ${why}: it is restarted preloading nothing`);
  }

  /** The zygote process said ready: its pid, and whether each child has a pid namespace. */
  #markReady(pid: number, pidns: boolean): void {
    this.#started = true;
    this.#zygotePid = pid;
    this.#ends.ready(pidns);
    this.#readyAt = this.#o.clock.now();
    this.#topUp();
  }

  #onReport(r: Report): void {
    if (r.kind === "c") {
      this.#ends.born(r.pid);
      this.#requested = Math.max(0, this.#requested - 1);
      const child = openChild(r.pid, r.fds, this.#o.childUid);
      if (child) {
        this.#o.onChild?.(r.pid);
        this.#offer(child);
      } else this.#topUp();
    } else if (r.kind === "x") {
      const idleAt = this.#idle.findIndex((c) => c.pid === r.pid);
      if (idleAt >= 0) {
        const [c] = this.#idle.splice(idleAt, 1);
        if (c) this.#dropIdle(c, false); // reaped: its pid (and group id) may be reused
      }
      this.#ends.exited(r.pid, r.status);
      this.#topUp();
    } else if (r.kind === "w") this.#ends.swept(r.uid, r.confirmed);
    else this.#forkFailed(r.n, r.why);
  }

  /**
   * The zygote could not fork `n` of the children asked for: as many waiting tasks fail. A count
   * that is not a positive integer is a preloaded package's garbage (a negative one would make
   * the pool count forks asked for that never come, and never ask again): ignored.
   */
  #forkFailed(n: number, why: string): void {
    if (!Number.isSafeInteger(n) || n <= 0) return;
    this.#requested = Math.max(0, this.#requested - n);
    this.#o.logger.warn({ why }, "python zygote could not fork a task's process");
    for (const w of this.#waiters.splice(0, n)) w.reject(new Error(why));
  }

  #dropIdle(c: Child, kill = true): void {
    destroy(c);
    if (kill) killGroup(c.pid);
    this.#o.onIdleGone?.(c.pid);
  }

  /** Whether the zygote that forked taken child `c` died (so did `c`, or it is being killed). */
  lost(c: Child): boolean {
    return this.#ends.lost(c);
  }

  /** A taken child that will not get its task after all: it is killed (unless known dead). */
  discard(c: Child): void {
    this.#ends.discard(c);
  }

  #offer(c: Child): void {
    const waiter = this.#waiters.shift();
    if (waiter) {
      this.#ends.taken(c.pid);
      waiter.resolve(c);
    } else this.#idle.push(c);
  }

  #topUpQueued = false;
  /** Ask for enough forks to cover the idle target plus everyone already waiting. */
  #topUp(): void {
    // Once per loop turn: one pipe write for a burst of takes.
    if (this.#topUpQueued) return;
    this.#topUpQueued = true;
    setImmediate(() => {
      this.#topUpQueued = false;
      this.#topUpNow();
    });
  }

  #topUpNow(): void {
    if (this.#closing || this.#zygotePid === undefined) return;
    const have = this.#idle.length + this.#requested;
    const want = this.#o.prefork + this.#waiters.length - have;
    // Forks go in batches of half the pool (unless a task waits): after every fork the zygote
    // copies the pages it touches next, and a batch forks from a tight loop (bench/README.md).
    const batch = Math.max(1, Math.floor(this.#o.prefork / 2));
    if (want >= batch || (want > 0 && this.#waiters.length > 0)) {
      this.#requested += want;
      this.#proc?.write(`f ${want}\n`);
    }
  }
  // Forks asked for whose "c" report has not arrived yet.
  #requested = 0;

  /**
   * The next idle child; rejects (with the system's reason) when the zygote could not fork it, at
   * close, and when `signal` aborts first (the task's wait ended: it no longer waits in line).
   */
  take(signal?: AbortSignal): Promise<Child> {
    if (this.#closing) return Promise.reject(new Error("the zygote is closed"));
    if (signal?.aborted) return Promise.reject(new Error("wait ended"));
    const c = this.#idle.shift();
    let p: Promise<Child>;
    if (c) {
      this.#ends.taken(c.pid);
      p = Promise.resolve(c);
    } else
      p = new Promise<Child>((resolve, reject) => {
        const w: Waiter = { resolve, reject };
        this.#waiters.push(w);
        signal?.addEventListener(
          "abort",
          () => {
            const at = this.#waiters.indexOf(w);
            if (at < 0) return; // already served: the caller discards the child
            this.#waiters.splice(at, 1);
            reject(signal.reason instanceof Error ? signal.reason : new Error("wait ended"));
          },
          { once: true },
        );
      });
    this.#topUp();
    return p;
  }

  /** Resolves when the zygote reaped `pid` (or cannot tell anymore). */
  exitStatus(pid: number, timeoutMs: number): Promise<ExitStatus> {
    return this.#ends.exitStatus(pid, timeoutMs);
  }

  release(pid: number): void {
    this.#ends.release(pid);
  }

  /** Whether nothing of `uid` is left running once child `pid` is reaped (TaskEnds.sweep). */
  sweep(uid: number, pid: number): Promise<boolean> {
    return this.#ends.sweep(uid, pid);
  }

  #onZygoteExit(proc: ZygoteProcess, code: number | null, signal: NodeJS.Signals | null): void {
    this.#zygotePid = undefined;
    // Children forked but not reported yet die with the zygote (their parent-death signal).
    this.#requested = 0;
    for (const c of this.#idle.splice(0)) this.#dropIdle(c);
    this.#ends.zygoteDied();
    void proc.letGo();
    if (this.#closing) return;
    this.#o.logger.error({ code, signal }, "python zygote died; restarting it");
    // The back-off starts again only after a zygote that lived a while: one that dies soon after
    // it is ready (a preloaded package can end it, docs/security.md) is restarted at most every 5 s.
    const lived = this.#readyAt > 0 ? this.#o.clock.now() - this.#readyAt : 0;
    if (lived > STABLE_MS) this.#restarts = 0;
    // A preloading zygote that dies soon after its ready, again and again, was the one way left
    // for a package to keep its environment's zygote dying (its tasks with it): the next process
    // preloads nothing, as after a report out of turn.
    else if (this.#readyAt > 0) this.#preloadNoMore("died soon after it was ready");
    this.#readyAt = 0;
    const delay = Math.min(5000, 50 * 2 ** this.#restarts++);
    this.#o.clock
      .setTimeout(() => {
        if (this.#closing) return;
        this.#spawn().catch((err: unknown) =>
          this.#o.logger.error({ err }, "python zygote failed to start"),
        );
      }, delay)
      .unref?.();
  }

  async close(): Promise<void> {
    this.#closing = true;
    // Tasks waiting for a child get none: they must not wait for good.
    for (const w of this.#waiters.splice(0)) w.reject(new Error("the zygote is closed"));
    for (const c of this.#idle.splice(0)) this.#dropIdle(c);
    this.#ends.killAll();
    await this.#proc?.close();
  }
}
