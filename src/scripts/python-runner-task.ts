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

/** Output past the cap is read and dropped, so a chatty script never blocks on a full pipe. */
class Capped {
  #chunks: Buffer[] = [];
  #size = 0;
  #dropped = 0;
  readonly #cap: number;
  constructor(cap: number) {
    this.#cap = cap;
  }
  push(b: Buffer): void {
    const room = this.#cap - this.#size;
    if (room >= b.length) {
      this.#chunks.push(b);
      this.#size += b.length;
    } else {
      if (room > 0) this.#chunks.push(b.subarray(0, room));
      this.#size += Math.max(0, room);
      this.#dropped += b.length - Math.max(0, room);
    }
  }
  text(): string {
    const s = Buffer.concat(this.#chunks).toString("utf8");
    if (!this.#dropped) return s;
    return `${s}\n[output truncated: ${this.#dropped} more bytes discarded]\n`;
  }
}

type ResultMessage =
  | { ok: true; value: unknown }
  | { ok: false; error: { type: string; message: string; traceback?: string } }
  | { exit: number };

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
  outputBytes: number,
): RunningTask {
  const started = performance.now();
  const stdout = new Capped(outputBytes);
  const stderr = new Capped(outputBytes);
  let killReason: KillReason | undefined;
  let result: ResultMessage | undefined;
  let resultBuf: Buffer[] = [];
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

  out.on("data", (b: Buffer) => stdout.push(b));
  err.on("data", (b: Buffer) => stderr.push(b));
  for (const [name, s] of [
    ["out", out],
    ["err", err],
  ] as const) {
    s.once("end", () => streamDone(name)).once("close", () => streamDone(name));
  }
  resultPipe.on("data", (b: Buffer) => {
    if (result) return;
    resultBuf.push(b);
    if (b[b.length - 1] !== 10) return;
    const line = Buffer.concat(resultBuf).toString("utf8");
    resultBuf = [];
    try {
      result = JSON.parse(line) as ResultMessage;
    } catch {
      result = { ok: false, error: { type: "ProtocolError", message: "unreadable result" } };
    }
    over();
    streamDone("result");
  });
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
    if (!result && !killReason) status = await pool.exitStatus(child.pid, 2000);
    pool.release(child.pid);
    const base = {
      stdout: stdout.text(),
      stderr: stderr.text(),
      durationMs: Math.round((performance.now() - started) * 1000) / 1000,
    };
    let outcome: TaskOutcome;
    if (result && "ok" in result && result.ok) {
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
    return { outcome, clean: result !== undefined && killReason === undefined };
  })();

  return {
    pid: child.pid,
    kill(reason) {
      if (result || killReason) return;
      killReason = reason;
      over();
    },
    done,
  };
}
