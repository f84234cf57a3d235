import { type ChildProcess, spawn } from "node:child_process";
import type { Clock } from "../clock.ts";
import type { Logger } from "./python-runner-sandbox.ts";

/** A report the zygote writes, one a line, once its start handshake is under way. */
export type Report =
  /** `c PID FD…`: a child forked, with the numbers of its four pipes. */
  | { kind: "c"; pid: number; fds: number[] }
  /** `x PID STATUS`: a child reaped. */
  | { kind: "x"; pid: number; status: number }
  /** `w UID 0|1`: the sweep of a uid, confirmed (0) or not. */
  | { kind: "w"; uid: number; confirmed: boolean }
  /** `e N WHY…`: `n` of the forks asked for failed. */
  | { kind: "e"; n: number; why: string };

/** A report line, or undefined for a kind the zygote does not send. */
export function parseReport(line: string): Report | undefined {
  const [kind, a, b, ...rest] = line.split(" ");
  const n = Number(a);
  if (kind === "c") return { kind, pid: n, fds: [b, ...rest].map(Number) };
  if (kind === "x") return { kind, pid: n, status: Number(b) };
  if (kind === "w") return { kind, uid: n, confirmed: Number(b) === 0 };
  if (kind === "e") return { kind, n, why: [b, ...rest].join(" ") };
  return undefined;
}

export interface ZygoteProcessOptions {
  command: string;
  args: string[];
  env: Record<string, string>;
  logger: Logger;
  clock: Clock;
  /** Stopped when not ready within this (SCRIPT_ENV_START_TIMEOUT_MS). */
  startMs?: number;
  /** As `ZygoteOptions.onHold` (python-runner-zygote.ts). */
  onHold?: (pid: number) => Promise<() => Promise<unknown>>;
  /** It said ready: its pid, and whether each child has a pid namespace of its own (`pidns`). */
  onReady: (pid: number, pidns: boolean) => void;
  /** It was stopped (a report out of turn, or not ready in time): it is being killed. */
  onFailed: () => void;
  onReport: (r: Report) => void;
  onExit: (code: number | null, signal: NodeJS.Signals | null) => void;
}

/**
 * One zygote process: spawned in a session of its own, its start handshake (`hold PID`, once,
 * first; `ready PID [pidns]`, once, from the held pid) checked, its reports parsed, and its hold
 * let go once it has exited (docs/security.md, "Preloading").
 */
export class ZygoteProcess {
  readonly #o: ZygoteProcessOptions;
  readonly #proc: ChildProcess;
  /** Resolves at its `ready`; rejects when it is stopped or exits first. */
  readonly ready: Promise<void>;
  #buf = "";
  #held: number | undefined;
  #readySeen = false;
  // Once it is stopped (a report out of turn) or gone, nothing more it wrote is read: its own
  // `ready` may already be in the pipe, and must not make a zygote being killed serve tasks.
  #stopped = false;
  /** What `onHold` gave: called once it has exited. */
  #unhold: (() => Promise<unknown>) | undefined;

  constructor(o: ZygoteProcessOptions) {
    this.#o = o;
    const proc = spawn(o.command, o.args, {
      stdio: ["pipe", "pipe", "pipe"],
      env: o.env,
      // A session of its own: a terminal's Ctrl-C reaches Node, which shuts the zygote down.
      detached: true,
    });
    this.#proc = proc;
    this.ready = new Promise<void>((resolve, reject) => this.#handshake(resolve, reject));
    proc.stderr?.setEncoding("utf8").on("data", (d: string) => {
      o.logger.warn({ zygote: d.trimEnd() }, "python zygote stderr");
    });
    proc.stdin?.on("error", () => {}); // EPIPE when it died: the exit handler deals with it
  }

  #handshake(resolve: () => void, reject: (err: Error) => void): void {
    const { logger, clock } = this.#o;
    const stop = (err: Error) => {
      this.#stopped = true;
      reject(err);
      this.#o.onFailed();
      this.#proc.kill("SIGKILL");
    };
    // Its packages' import may never end, or leave half a line before its `ready`.
    const ms = this.#o.startMs;
    const late =
      ms === undefined
        ? undefined
        : clock.setTimeout(() => {
            if (this.#readySeen || this.#stopped) return;
            logger.warn({ ms }, `python zygote not ready within ${ms} ms: stopped`);
            stop(new Error(`python zygote was not ready within ${ms} ms`));
          }, ms);
    const settled = () => {
      if (late) clock.clearTimeout(late);
    };
    const forged = (line: string) => {
      logger.error({ line }, "python zygote sent a report out of turn: stopped");
      stop(new Error("python zygote sent a report out of turn"));
    };
    this.#proc.stdout?.setEncoding("utf8").on("data", (d: string) => {
      if (this.#stopped) return;
      this.#buf += d;
      let nl = this.#buf.indexOf("\n");
      while (nl >= 0 && !this.#stopped) {
        const line = this.#buf.slice(0, nl);
        this.#buf = this.#buf.slice(nl + 1);
        nl = this.#buf.indexOf("\n");
        this.#line(line, forged, (pid, pidns) => {
          settled();
          this.#o.onReady(pid, pidns);
          resolve();
        });
      }
    });
    this.#proc.once("exit", (code, signal) => {
      this.#stopped = true;
      settled();
      reject(new Error(`python zygote exited before ready (code ${code}, signal ${signal})`));
      this.#o.onExit(code, signal);
    });
    this.#proc.once("error", reject);
  }

  /**
   * `hold` comes once, first, and `ready` once, from the held pid: a preloaded package writes to
   * the same pipe after `hold` and could forge either (docs/security.md, "Preloading").
   */
  #line(
    line: string,
    forged: (line: string) => void,
    ready: (pid: number, pidns: boolean) => void,
  ): void {
    if (line.startsWith("ready ")) {
      const [, pid, flag] = line.split(" ");
      if (this.#readySeen || (this.#held !== undefined && Number(pid) !== this.#held)) {
        forged(line);
        return;
      }
      this.#readySeen = true;
      ready(Number(pid), flag === "pidns");
    } else if (line.startsWith("hold ")) {
      if (this.#held !== undefined || this.#readySeen) forged(line);
      else {
        this.#held = Number(line.slice(5));
        this.#hold(this.#held);
      }
    } else {
      const r = parseReport(line);
      if (r) this.#o.onReport(r);
    }
  }

  #hold(pid: number): void {
    const proc = this.#proc;
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

  /** Whether a command can still be written to it. */
  get writable(): boolean {
    return this.#proc.stdin?.writable === true;
  }

  /** A command line (`f N`, `k UID PID`), newline included. */
  write(line: string): void {
    this.#proc.stdin?.write(line);
  }

  /** The exited process's hold is let go (its cgroup released). */
  letGo(): Promise<unknown> {
    const unhold = this.#unhold;
    this.#unhold = undefined;
    return unhold ? unhold().catch(() => {}) : Promise.resolve();
  }

  /** Asks it to end (its stdin closed), kills it after 2 s, and lets its hold go. */
  async close(): Promise<void> {
    const proc = this.#proc;
    if (proc.exitCode === null && proc.signalCode === null) {
      const exited = new Promise((r) => proc.once("exit", r));
      proc.stdin?.end();
      const t = this.#o.clock.setTimeout(() => proc.kill("SIGKILL"), 2000);
      await exited;
      this.#o.clock.clearTimeout(t);
    }
    await this.letGo();
  }
}
