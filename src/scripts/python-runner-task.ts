import { constants } from "node:os";
import { StringDecoder } from "node:string_decoder";
import type { Clock, TimerHandle } from "../clock.ts";
import {
  Bytes,
  Capped,
  outputDrainCap,
  type ResultMessage,
  readResult,
  resultLineCap,
  type TaskError,
} from "./python-runner-output.ts";
import type { Child, ExitStatus, ZygotePool } from "./python-runner-zygote.ts";
import type { TaskOutcome, TaskSpec } from "./runner-types.ts";

export type KillReason = "terminate" | "timeout";

export interface RunningTask {
  readonly pid: number;
  kill(reason: KillReason): void;
  /** Resolves with the outcome and whether the task ended through its own result message. */
  readonly done: Promise<{ outcome: TaskOutcome; clean: boolean }>;
}

const signalNames = new Map<number, string>(
  Object.entries(constants.signals).map(([name, n]) => [n, name]),
);

function describeDeath(status: ExitStatus): string {
  if (status === "zygote-died") return "process died: the python zygote died and took it along";
  if (status === "unknown") return "process died without a result (exit status unknown)";
  if (status >= 0) return `process died: exited with code ${status} before returning a result`;
  const n = -status;
  const name = signalNames.get(n) ?? "?";
  const hint =
    name === "SIGKILL"
      ? " (memory or CPU limit?)"
      : name === "SIGXCPU"
        ? " (CPU time limit)"
        : name === "SIGSEGV" || name === "SIGBUS"
          ? " (crash, or memory limit?)"
          : "";
  return `process died: killed by signal ${n} ${name}${hint}`;
}

const killGroup = (pid: number): void => {
  try {
    process.kill(-pid, "SIGKILL");
  } catch {
    // the group is already gone
  }
};

/** How long a finished task's leftover holders may keep stdout/stderr open before we cut them. */
const STREAM_GRACE_MS = 300;

/** What is known of one task on its child while it runs, and how it ends. */
interface Watch {
  pool: ZygotePool;
  child: Child;
  limits: { outputBytes: number; resultBytes: number };
  clock: Clock;
  started: number;
  drain: number;
  stdout: Capped;
  stderr: Capped;
  lineCap: number;
  killReason?: KillReason;
  result?: ResultMessage;
  /** The task sent more than it may: it is killed and fails with this. */
  refused?: TaskError;
  /** The result line so far, when it comes in more than one chunk. */
  line?: Bytes;
  grace?: TimerHandle;
  finish: () => void;
  /**
   * Each stream counts once, on its first end or close. The child closes its stdout and stderr
   * before it sends the result, so the usual path needs no wait for the process to exit.
   */
  pending: Set<string>;
  /** Watchers of the task's output as it is printed (docs/live-progress.md). */
  live?: TaskSpec["onOutput"] | undefined;
}

export function runOnChild(
  pool: ZygotePool,
  child: Child,
  message: string,
  limits: { outputBytes: number; resultBytes: number },
  clock: Clock,
  live?: TaskSpec["onOutput"],
): RunningTask {
  const drain = outputDrainCap(limits.outputBytes);
  let finish!: () => void;
  const ended = new Promise<void>((r) => {
    finish = r;
  });
  const w: Watch = {
    pool,
    child,
    limits,
    clock,
    started: performance.now(),
    drain,
    stdout: new Capped(limits.outputBytes, drain),
    stderr: new Capped(limits.outputBytes, drain),
    lineCap: resultLineCap(limits.resultBytes),
    finish,
    pending: new Set(["result", "out", "err"]),
    live,
  };
  listen(w);
  child.task.end(message);
  return {
    pid: child.pid,
    kill(reason) {
      if (w.result || w.killReason || w.refused) return;
      w.killReason = reason;
      over(w);
    },
    done: ended.then(() => settle(w)),
  };
}

function listen(w: Watch): void {
  const { out, err, result: resultPipe } = w.child;
  out.on("data", onOutput(w, "stdout", out, w.stdout));
  err.on("data", onOutput(w, "stderr", err, w.stderr));
  for (const [name, s] of [
    ["out", out],
    ["err", err],
  ] as const) {
    s.once("end", () => streamDone(w, name)).once("close", () => streamDone(w, name));
  }
  resultPipe.on(
    "data",
    guarded(w, "the result", resultPipe, (b) => onResult(w, b)),
  );
  resultPipe.once("close", () => {
    over(w);
    streamDone(w, "result");
  });
  resultPipe.resume();
  out.resume();
  err.resume();
  // Node's ends read from the moment the child was reported: a child that died before its task
  // came (with its zygote, or alone) closed them then, with nobody listening for it.
  if (resultPipe.destroyed) {
    over(w);
    streamDone(w, "result");
  }
  if (out.destroyed) streamDone(w, "out");
  if (err.destroyed) streamDone(w, "err");
}

function streamDone(w: Watch, name: string): void {
  if (w.pending.delete(name) && w.pending.size === 0) w.finish();
}

/** Once the task is over (result or death), anything still holding the streams is a leftover. */
function over(w: Watch): void {
  if (w.grace) return;
  killGroup(w.child.pid);
  const { out, err, result, task } = w.child;
  w.grace = w.clock.setTimeout(() => {
    for (const s of [out, err, result, task]) s.destroy();
    w.finish();
  }, STREAM_GRACE_MS);
}

/** Nothing more is read from `stream`: its close ends it like any other (docs/script-service.md). */
function refuse(w: Watch, error: TaskError, stream: Child["out"]): void {
  stream.destroy();
  if (w.result || w.killReason || w.refused) return;
  w.refused = error;
  over(w);
}

/** A handler of task output never throws into the event loop: a failure fails the task. */
function guarded(w: Watch, name: string, stream: Child["out"], fn: (b: Buffer) => void) {
  return (b: Buffer): void => {
    try {
      fn(b);
    } catch (e) {
      try {
        const why = e instanceof Error ? e.message : String(e);
        refuse(w, { type: "ProtocolError", message: `could not read ${name}: ${why}` }, stream);
      } catch {
        // nothing left to do: the grace timer or the exit report ends the task
      }
    }
  };
}

function onOutput(w: Watch, name: "stdout" | "stderr", stream: Child["out"], capped: Capped) {
  // Only what the record keeps goes live: past the cap the rest is dropped there too.
  const decoder = w.live && new StringDecoder("utf8");
  return guarded(w, name, stream, (b) => {
    const room = capped.room();
    if (decoder && room > 0)
      w.live?.(name, decoder.write(room < b.length ? b.subarray(0, room) : b));
    if (capped.push(b)) return;
    const message = `${name} passed ${w.drain} bytes (its first ${w.limits.outputBytes} are kept): the task was killed`;
    refuse(w, { type: "OutputTooLarge", message }, stream);
  });
}

function onResult(w: Watch, b: Buffer): void {
  if (w.result || w.refused) return;
  const nl = b.indexOf(10);
  let full: Buffer | undefined;
  if (w.line === undefined && nl >= 0 && nl <= w.lineCap) {
    full = b.subarray(0, nl); // the usual case: the whole line in one chunk, nothing copied
  } else {
    const part = nl < 0 ? b : b.subarray(0, nl);
    w.line ??= new Bytes(w.lineCap);
    if (w.line.length + part.length > w.lineCap) {
      w.line = undefined;
      const message = `the return value is over the ${w.limits.resultBytes} byte limit: the task sent more than ${w.lineCap} bytes of it and was killed`;
      refuse(w, { type: "ResultTooLarge", message }, w.child.result);
      return;
    }
    w.line.append(part);
    if (nl < 0) return;
    full = w.line.bytes();
    w.line = undefined;
  }
  w.result = readResult(full);
  over(w);
  streamDone(w, "result");
}

async function settle(w: Watch): Promise<{ outcome: TaskOutcome; clean: boolean }> {
  const { child, pool } = w;
  for (const s of [child.out, child.err, child.result, child.task]) s.destroy();
  if (w.grace) w.clock.clearTimeout(w.grace);
  let status: ExitStatus | undefined;
  if (!w.result && !w.killReason && !w.refused) status = await pool.exitStatus(child.pid, 2000);
  pool.release(child.pid);
  const base = {
    stdout: w.stdout.text(),
    stderr: w.stderr.text(),
    durationMs: Math.round((performance.now() - w.started) * 1000) / 1000,
  };
  const outcome = { ...outcomeOf(w, status), ...base };
  const clean = w.result !== undefined && w.killReason === undefined && w.refused === undefined;
  return { outcome, clean };
}

type Ending = Omit<TaskOutcome, "stdout" | "stderr" | "durationMs">;

function outcomeOf(w: Watch, status: ExitStatus | undefined): Ending {
  const { result, killReason, refused } = w;
  if (refused) return { status: "FAILURE", error: refused };
  if (result && "ok" in result && result.ok) return { status: "SUCCESS", value: result.value };
  if (killReason === "terminate")
    return { status: "CANCELED", error: { type: "Canceled", message: "task terminated" } };
  if (killReason === "timeout")
    return { status: "FAILURE", error: { type: "Timeout", message: "task timed out" } };
  if (result && "exit" in result)
    return result.exit === 0
      ? { status: "SUCCESS", value: null }
      : {
          status: "FAILURE",
          error: {
            type: "SystemExit",
            message: `script exited with code ${result.exit}${result.text ? `: ${result.text}` : ""}`,
          },
        };
  if (result && "error" in result) return { status: "FAILURE", error: result.error };
  return {
    status: "FAILURE",
    error: { type: "ProcessDied", message: describeDeath(status ?? "unknown") },
  };
}
