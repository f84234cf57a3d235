import { constants } from "node:os";
import type { Child, ExitStatus, ZygotePool } from "./python-runner-zygote.ts";
import type { TaskOutcome } from "./runner-types.ts";

export type KillReason = "terminate" | "timeout";

export interface RunningTask {
  readonly pid: number;
  kill(reason: KillReason): void;
  /** Resolves with the outcome and whether the task ended through its own result message. */
  readonly done: Promise<{ outcome: TaskOutcome; clean: boolean }>;
}

/**
 * The first `cap` bytes a pipe sent, in one buffer grown by doubling: never more than `cap` bytes
 * held, however the sender splits its writes (a Buffer kept per chunk costs far more than its
 * bytes when a script writes one byte at a time).
 */
class Bytes {
  #buf: Buffer | undefined;
  /** Until a second chunk comes, the first is kept as it came: most tasks send one. */
  #only: Buffer | undefined;
  #len = 0;
  readonly cap: number;
  constructor(cap: number) {
    this.cap = cap;
  }
  get length(): number {
    return this.#len;
  }
  /** Appends what fits under the cap; returns how many bytes of `b` were kept. */
  append(b: Buffer): number {
    const n = Math.min(b.length, this.cap - this.#len);
    if (n <= 0) return 0;
    if (this.#len === 0) {
      this.#only = n === b.length ? b : b.subarray(0, n);
      this.#len = n;
      return n;
    }
    if (this.#only) {
      this.#buf = this.#only;
      this.#only = undefined;
    }
    const need = this.#len + n;
    if (!this.#buf || this.#buf.length < need) {
      const grown = Buffer.allocUnsafe(
        Math.min(this.cap, Math.max(need, 2 * (this.#buf?.length ?? 0), 256)),
      );
      this.#buf?.copy(grown, 0, 0, this.#len);
      this.#buf = grown;
    }
    b.copy(this.#buf, this.#len, 0, n);
    this.#len = need;
    return n;
  }
  bytes(): Buffer {
    return this.#only ?? this.#buf?.subarray(0, this.#len) ?? Buffer.alloc(0);
  }
}

/**
 * stdout or stderr: the first `cap` bytes are kept, the rest is read and dropped so a chatty
 * script never blocks on a full pipe, but only up to `drain` bytes in all: past that the pipe is
 * no longer read and the task is killed (docs/script-service.md).
 */
class Capped {
  readonly #kept: Bytes;
  #total = 0;
  readonly drain: number;
  constructor(cap: number, drain: number) {
    this.#kept = new Bytes(cap);
    this.drain = drain;
  }
  /** False once the stream sent more than `drain` bytes. */
  push(b: Buffer): boolean {
    this.#kept.append(b);
    this.#total += b.length;
    return this.#total <= this.drain;
  }
  text(): string {
    const s = this.#kept.bytes().toString("utf8");
    const dropped = this.#total - this.#kept.length;
    if (!dropped) return s;
    return `${s}\n[output truncated: ${dropped} more bytes discarded]\n`;
  }
}

type TaskError = { type: string; message: string; traceback?: string };

type ResultMessage =
  | { ok: true; value: unknown }
  | { ok: false; error: TaskError }
  | { exit: number };

const unreadable: ResultMessage = {
  ok: false,
  error: { type: "ProtocolError", message: "unreadable result" },
};

/** The task's result line as a message; anything else a script may have written is unreadable. */
function readResult(line: Buffer): ResultMessage {
  let m: unknown;
  try {
    m = JSON.parse(line.toString("utf8"));
  } catch {
    return unreadable;
  }
  if (typeof m !== "object" || m === null) return unreadable;
  const r = m as Record<string, unknown>;
  if (r.ok === true) return { ok: true, value: r.value };
  // sys.exit(True) reports a bool, which Python exits with as 1.
  if (typeof r.exit === "number" || typeof r.exit === "boolean") return { exit: Number(r.exit) };
  const e = r.error as Record<string, unknown> | null | undefined;
  if (r.ok === false && typeof e?.type === "string" && typeof e.message === "string") {
    const error: TaskError = { type: e.type, message: e.message };
    if (typeof e.traceback === "string") error.traceback = e.traceback;
    return { ok: false, error };
  }
  return unreadable;
}

const KiB = 1024;
const MiB = 1024 * KiB;

/**
 * Most the result pipe may carry: the value's limit plus room for the message around it and for
 * Python's number spellings (docs/script-service.md). A longer line is never parsed.
 */
export const resultLineCap = (resultBytes: number): number =>
  resultBytes + Math.max(64 * KiB, Math.floor(resultBytes / 8));

/** Most stdout or stderr is read (and, past the output limit, dropped) before the task is killed. */
export const outputDrainCap = (outputBytes: number): number => Math.max(64 * outputBytes, 64 * MiB);

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

export function runOnChild(
  pool: ZygotePool,
  child: Child,
  message: string,
  limits: { outputBytes: number; resultBytes: number },
): RunningTask {
  const started = performance.now();
  const drain = outputDrainCap(limits.outputBytes);
  const stdout = new Capped(limits.outputBytes, drain);
  const stderr = new Capped(limits.outputBytes, drain);
  const lineCap = resultLineCap(limits.resultBytes);
  let killReason: KillReason | undefined;
  let result: ResultMessage | undefined;
  /** The task sent more than it may: it is killed and fails with this. */
  let refused: TaskError | undefined;
  /** The result line so far, when it comes in more than one chunk. */
  let line: Bytes | undefined;
  let grace: NodeJS.Timeout | undefined;
  let finish!: () => void;
  const ended = new Promise<void>((r) => {
    finish = r;
  });
  const { task, result: resultPipe, out, err } = child;
  // Each stream counts once, on its first end or close. The child closes its stdout and stderr
  // before it sends the result, so the usual path needs no wait for the process to exit.
  const pending = new Set<string>(["result", "out", "err"]);
  const streamDone = (name: string): void => {
    if (pending.delete(name) && pending.size === 0) finish();
  };

  // Once the task is over (result or death), anything still holding the streams is a leftover.
  const over = (): void => {
    if (grace) return;
    killGroup(child.pid);
    grace = setTimeout(() => {
      for (const s of [out, err, resultPipe, task]) s.destroy();
      finish();
    }, STREAM_GRACE_MS);
  };

  // Nothing more is read from `stream`: its close ends it like any other (docs/script-service.md).
  const refuse = (error: TaskError, stream: Child["out"]): void => {
    stream.destroy();
    if (result || killReason || refused) return;
    refused = error;
    over();
  };

  /** A handler of task output never throws into the event loop: a failure fails the task. */
  const guarded =
    (name: string, stream: Child["out"], fn: (b: Buffer) => void) =>
    (b: Buffer): void => {
      try {
        fn(b);
      } catch (e) {
        try {
          const why = e instanceof Error ? e.message : String(e);
          refuse({ type: "ProtocolError", message: `could not read ${name}: ${why}` }, stream);
        } catch {
          // nothing left to do: the grace timer or the exit report ends the task
        }
      }
    };

  const onOutput = (name: "stdout" | "stderr", stream: Child["out"], capped: Capped) =>
    guarded(name, stream, (b) => {
      if (capped.push(b)) return;
      const message = `${name} passed ${drain} bytes (its first ${limits.outputBytes} are kept): the task was killed`;
      refuse({ type: "OutputTooLarge", message }, stream);
    });
  out.on("data", onOutput("stdout", out, stdout));
  err.on("data", onOutput("stderr", err, stderr));
  for (const [name, s] of [
    ["out", out],
    ["err", err],
  ] as const) {
    s.once("end", () => streamDone(name)).once("close", () => streamDone(name));
  }
  resultPipe.on(
    "data",
    guarded("the result", resultPipe, (b) => {
      if (result || refused) return;
      const nl = b.indexOf(10);
      let full: Buffer | undefined;
      if (line === undefined && nl >= 0 && nl <= lineCap) {
        full = b.subarray(0, nl); // the usual case: the whole line in one chunk, nothing copied
      } else {
        const part = nl < 0 ? b : b.subarray(0, nl);
        line ??= new Bytes(lineCap);
        if (line.length + part.length > lineCap) {
          line = undefined;
          const message = `the return value is over the ${limits.resultBytes} byte limit: the task sent more than ${lineCap} bytes of it and was killed`;
          refuse({ type: "ResultTooLarge", message }, resultPipe);
          return;
        }
        line.append(part);
        if (nl < 0) return;
        full = line.bytes();
        line = undefined;
      }
      result = readResult(full);
      over();
      streamDone("result");
    }),
  );
  resultPipe.once("close", () => {
    over();
    streamDone("result");
  });
  resultPipe.resume();
  out.resume();
  err.resume();
  task.end(message);

  const done = (async () => {
    await ended;
    for (const s of [out, err, resultPipe, task]) s.destroy();
    clearTimeout(grace);
    let status: ExitStatus | undefined;
    if (!result && !killReason && !refused) status = await pool.exitStatus(child.pid, 2000);
    pool.release(child.pid);
    const base = {
      stdout: stdout.text(),
      stderr: stderr.text(),
      durationMs: Math.round((performance.now() - started) * 1000) / 1000,
    };
    let outcome: TaskOutcome;
    if (refused) {
      outcome = { status: "FAILURE", error: refused, ...base };
    } else if (result && "ok" in result && result.ok) {
      outcome = { status: "SUCCESS", value: result.value, ...base };
    } else if (killReason === "terminate") {
      outcome = {
        status: "CANCELED",
        error: { type: "Canceled", message: "task terminated" },
        ...base,
      };
    } else if (killReason === "timeout") {
      outcome = {
        status: "FAILURE",
        error: { type: "Timeout", message: "task timed out" },
        ...base,
      };
    } else if (result && "exit" in result) {
      outcome =
        result.exit === 0
          ? { status: "SUCCESS", value: null, ...base }
          : {
              status: "FAILURE",
              error: { type: "SystemExit", message: `script exited with code ${result.exit}` },
              ...base,
            };
    } else if (result && "error" in result) {
      outcome = { status: "FAILURE", error: result.error, ...base };
    } else {
      outcome = {
        status: "FAILURE",
        error: { type: "ProcessDied", message: describeDeath(status ?? "unknown") },
        ...base,
      };
    }
    const clean = result !== undefined && killReason === undefined && refused === undefined;
    return { outcome, clean };
  })();

  return {
    pid: child.pid,
    kill(reason) {
      if (result || killReason || refused) return;
      killReason = reason;
      over();
    },
    done,
  };
}
