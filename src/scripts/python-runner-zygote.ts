import { type ChildProcess, spawn } from "node:child_process";
import type { Clock } from "../clock.ts";
import type { Logger } from "./python-runner-sandbox.ts";
import { type Child, destroy, openChild } from "./zygote-child.ts";
import { ReapedChildren } from "./zygote-reaped.ts";

export type { Child } from "./zygote-child.ts";

/** Exit code, -signal, or why nobody will ever know. */
export type ExitStatus = number | "zygote-died" | "unknown";

interface Busy {
  status?: ExitStatus;
  waiters: Array<(s: ExitStatus) => void>;
}

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

const killGroup = (pid: number): void => {
  try {
    process.kill(-pid, "SIGKILL");
  } catch {
    // already gone
  }
};

/**
 * Owns the zygote process and its children: keeps `prefork` idle children connected, hands
 * them out in FIFO order, relays exit statuses, and restarts the zygote if it dies.
 */
export class ZygotePool {
  readonly #o: ZygoteOptions;
  #proc: ChildProcess | undefined;
  #zygotePid: number | undefined;
  #idle: Child[] = [];
  #busy = new Map<number, Busy>();
  #waiters: Waiter[] = [];
  #closing = false;
  #restarts = 0;
  /** Some zygote process of this pool said ready (it started). */
  #started = false;
  /** A process failed while preloading: every later one runs with `plainArgs`. */
  #plain = false;
  /** When the running zygote process said ready. */
  #readyAt = 0;
  #ready: Promise<void> | undefined;
  /** Set when the zygote's children each have a pid namespace of their own (`ready … pidns`). */
  #reaped: ReapedChildren | undefined;
  /** What `onHold` gave for the running zygote process: called once it has exited. */
  #unhold: (() => Promise<unknown>) | undefined;

  constructor(o: ZygoteOptions) {
    this.#o = o;
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
    const args = this.#plain && this.#o.plainArgs ? this.#o.plainArgs : this.#o.args;
    const proc = spawn(this.#o.command, args, {
      stdio: ["pipe", "pipe", "pipe"],
      env: this.#o.env,
      // A session of its own: a terminal's Ctrl-C reaches Node, which shuts the zygote down.
      detached: true,
    });
    this.#proc = proc;
    let buf = "";
    // `hold` comes once, first, and `ready` once, from the held pid: a preloaded package writes
    // to the same pipe after `hold` and could forge either (docs/security.md, "Preloading").
    let held: number | undefined;
    let readySeen = false;
    // Once it is stopped (a report out of turn) or gone, nothing more it wrote is read: its own
    // `ready` may already be in the pipe, and must not make a zygote being killed serve tasks.
    let stopped = false;
    this.#ready = new Promise<void>((resolve, reject) => {
      const forged = (line: string) => {
        stopped = true;
        this.#o.logger.error({ line }, "python zygote sent a report out of turn: stopped");
        reject(new Error("python zygote sent a report out of turn"));
        this.#failed(proc);
      };
      // Its packages' import may never end, or leave half a line before its `ready`.
      const ms = this.#o.startMs;
      const late =
        ms === undefined
          ? undefined
          : this.#o.clock.setTimeout(() => {
              if (readySeen || stopped) return;
              stopped = true;
              this.#o.logger.warn({ ms }, `python zygote not ready within ${ms} ms: stopped`);
              reject(new Error(`python zygote was not ready within ${ms} ms`));
              this.#failed(proc);
            }, ms);
      const settled = () => {
        if (late) this.#o.clock.clearTimeout(late);
      };
      proc.stdout?.setEncoding("utf8").on("data", (d: string) => {
        if (stopped) return;
        buf += d;
        let nl = buf.indexOf("\n");
        while (nl >= 0 && !stopped) {
          const line = buf.slice(0, nl);
          buf = buf.slice(nl + 1);
          nl = buf.indexOf("\n");
          if (line.startsWith("ready ")) {
            const [, pid, flag] = line.split(" ");
            if (readySeen || (held !== undefined && Number(pid) !== held)) forged(line);
            else {
              readySeen = true;
              settled();
              this.#markReady(pid, flag);
              resolve();
            }
          } else if (line.startsWith("hold ")) {
            if (held !== undefined || readySeen) forged(line);
            else {
              held = Number(line.slice(5));
              this.#hold(proc, held);
            }
          } else this.#onReport(line);
        }
      });
      proc.once("exit", (code, signal) => {
        stopped = true;
        settled();
        reject(new Error(`python zygote exited before ready (code ${code}, signal ${signal})`));
        if (this.#proc === proc) this.#onZygoteExit(code, signal);
      });
      proc.once("error", reject);
    });
    proc.stderr?.setEncoding("utf8").on("data", (d: string) => {
      this.#o.logger.warn({ zygote: d.trimEnd() }, "python zygote stderr");
    });
    proc.stdin?.on("error", () => {}); // EPIPE when it died: the exit handler deals with it
    return this.#ready;
  }

  /**
   * A zygote process that sent a report out of turn or was not ready in time is killed. Once the
   * pool has started (tasks may wait for its children), the next process preloads nothing.
   */
  #failed(proc: ChildProcess): void {
    if (this.#started) this.#preloadNoMore("failed while preloading");
    proc.kill("SIGKILL");
  }

  #preloadNoMore(why: string): void {
    if (!this.#o.plainArgs || this.#plain) return;
    this.#plain = true;
    this.#restarts = 0;
    this.#o.logger.warn({}, `an environment's zygote ${why}: it is restarted preloading nothing`);
  }

  /** The zygote process said ready: its pid, and whether each child has a pid namespace. */
  #markReady(pid: string | undefined, flag: string | undefined): void {
    this.#started = true;
    this.#zygotePid = Number(pid);
    this.#reaped = flag === "pidns" ? new ReapedChildren(this.#o.clock) : undefined;
    this.#readyAt = this.#o.clock.now();
    this.#topUp();
  }

  #hold(proc: ChildProcess, pid: number): void {
    const go = () => proc.stdin?.write("g\n");
    if (!this.#o.onHold) {
      go();
      return;
    }
    this.#o.onHold(pid).then(
      (unhold) => {
        // Gone meanwhile (killed, or the pool closed): its exit found no hold to let go.
        if (proc.exitCode !== null || proc.signalCode !== null) {
          void unhold().catch(() => {});
          return;
        }
        this.#unhold = unhold;
        go();
      },
      (err: unknown) => {
        this.#o.logger.error({ err }, "python zygote could not be held: stopped");
        proc.kill("SIGKILL");
      },
    );
  }

  /** The exited zygote process's hold is let go (its cgroup released). */
  #letGo(): Promise<unknown> {
    const unhold = this.#unhold;
    this.#unhold = undefined;
    return unhold ? unhold().catch(() => {}) : Promise.resolve();
  }

  #onReport(line: string): void {
    const [kind, a, b, ...rest] = line.split(" ");
    const pid = Number(a);
    if (kind === "c") {
      this.#reaped?.born(pid);
      this.#requested = Math.max(0, this.#requested - 1);
      const child = openChild(pid, [b, ...rest].map(Number), this.#o.childUid);
      if (child) {
        this.#o.onChild?.(pid);
        this.#offer(child);
      } else this.#topUp();
    } else if (kind === "x") {
      const status = Number(b);
      const idleAt = this.#idle.findIndex((c) => c.pid === pid);
      if (idleAt >= 0) {
        const [c] = this.#idle.splice(idleAt, 1);
        if (c) this.#dropIdle(c, false); // reaped: its pid (and group id) may be reused
      }
      const busy = this.#busy.get(pid);
      if (busy) settle(busy, status);
      this.#reaped?.reaped(pid);
      this.#topUp();
    } else if (kind === "w") {
      this.#swept(pid, Number(b) === 0);
    } else if (kind === "e") {
      this.#forkFailed(pid, [b, ...rest].join(" "));
    }
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
    return this.#busy.get(c.pid)?.status === "zygote-died";
  }

  /** A taken child that will not get its task after all: it is killed (unless known dead). */
  discard(c: Child): void {
    destroy(c);
    if (this.#busy.get(c.pid)?.status === undefined) killGroup(c.pid);
    this.#busy.delete(c.pid);
  }

  #offer(c: Child): void {
    const waiter = this.#waiters.shift();
    if (waiter) {
      this.#busy.set(c.pid, { waiters: [] });
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
      this.#proc?.stdin?.write(`f ${want}\n`);
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
      this.#busy.set(c.pid, { waiters: [] });
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
    const busy = this.#busy.get(pid);
    if (!busy) return Promise.resolve("unknown");
    if (busy.status !== undefined) return Promise.resolve(busy.status);
    return new Promise((resolve) => {
      const t = this.#o.clock.setTimeout(() => resolve("unknown"), timeoutMs);
      busy.waiters.push((s) => {
        this.#o.clock.clearTimeout(t);
        resolve(s);
      });
    });
  }

  release(pid: number): void {
    this.#busy.delete(pid);
  }

  #sweeps = new Map<number, Array<(confirmed: boolean) => void>>();

  /**
   * Resolves true once nothing of `uid` is left running: the zygote checks after the task's
   * child `pid` is reaped, and kills whatever the task left (docs/security.md). False: it could
   * not be confirmed (the zygote died, or leftovers outlived the sweep); the uid must not be
   * handed to another task.
   */
  sweep(uid: number, pid: number): Promise<boolean> {
    if (this.#zygotePid === undefined || !this.#proc?.stdin?.writable)
      return Promise.resolve(false);
    // With a pid namespace per child, its reaping is the confirmation; the zygote is asked only
    // when that does not come within a second (a task process stuck in the kernel).
    if (this.#reaped && pid > 0)
      return this.#reaped
        .wait(pid, 1000)
        .then((reaped) => (reaped === undefined ? this.#ask(uid, pid) : reaped));
    return this.#ask(uid, pid);
  }

  #ask(uid: number, pid: number): Promise<boolean> {
    if (this.#zygotePid === undefined || !this.#proc?.stdin?.writable)
      return Promise.resolve(false);
    return new Promise((resolve) => {
      const waiting = this.#sweeps.get(uid);
      if (waiting) waiting.push(resolve);
      else this.#sweeps.set(uid, [resolve]);
      this.#proc?.stdin?.write(`k ${uid} ${pid}\n`);
    });
  }

  #swept(uid: number, confirmed: boolean): void {
    const waiting = this.#sweeps.get(uid);
    this.#sweeps.delete(uid);
    for (const w of waiting ?? []) w(confirmed);
  }

  #onZygoteExit(code: number | null, signal: NodeJS.Signals | null): void {
    this.#zygotePid = undefined;
    // Children forked but not reported yet die with the zygote (their parent-death signal).
    this.#requested = 0;
    for (const c of this.#idle.splice(0)) this.#dropIdle(c);
    // Running tasks lose their reaper: kill them and tell their waiters why.
    for (const [pid, busy] of this.#busy) {
      killGroup(pid);
      settle(busy, "zygote-died");
    }
    for (const uid of [...this.#sweeps.keys()]) this.#swept(uid, false);
    void this.#letGo();
    this.#reaped?.clear();
    this.#reaped = undefined;
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
    const proc = this.#proc;
    // Tasks waiting for a child get none: they must not wait for good.
    for (const w of this.#waiters.splice(0)) w.reject(new Error("the zygote is closed"));
    for (const c of this.#idle.splice(0)) this.#dropIdle(c);
    for (const pid of this.#busy.keys()) killGroup(pid);
    if (proc && proc.exitCode === null && proc.signalCode === null) {
      const exited = new Promise((r) => proc.once("exit", r));
      proc.stdin?.end();
      const t = this.#o.clock.setTimeout(() => proc.kill("SIGKILL"), 2000);
      await exited;
      this.#o.clock.clearTimeout(t);
    }
    await this.#letGo();
  }
}

function settle(busy: Busy, status: ExitStatus): void {
  busy.status = status;
  for (const w of busy.waiters.splice(0)) w(status);
}
