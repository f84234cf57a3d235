import { type ChildProcess, type ChildProcessWithoutNullStreams, spawn } from "node:child_process";
import { constants } from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import type { Clock } from "../clock.ts";
import type { Config } from "../config.ts";
import { bwrapArgs, IN_SANDBOX, type Logger, type SandboxKind } from "./python-runner-sandbox.ts";
import { type CheckedFile, parse, type SyntaxVerdict } from "./syntax-verdict.ts";

const PYTHON_DIR = fileURLToPath(new URL("./python/", import.meta.url));
const CHECKER = "syntax_check.py";
const STDOUT_CAP = 64 * 1024;
const STDERR_TAIL = 2048;

// Named from here by their users; written in syntax-verdict.ts with the output parsing.
export type { CheckedFile, SyntaxVerdict } from "./syntax-verdict.ts";

/**
 * Compiles (never runs) uploaded and inline Python exactly as a task will load it, in the same
 * sandbox and rlimits as a task, a few at once, each killed past a timeout
 * (docs/script-service.md, "Upload").
 */
export interface SyntaxChecker {
  /** One check for all the files of one item: the first problem, or ok. */
  check(files: CheckedFile[]): Promise<SyntaxVerdict>;
  close(): Promise<void>;
}

type Problem = Exclude<SyntaxVerdict, { ok: true }>;

/** With no isolation layer and none accepted explicitly, the check refuses as tasks do. */
export function refusingSyntaxChecker(refusal: string): SyntaxChecker {
  return {
    check: async (files) =>
      files.length === 0 ? { ok: true } : { ok: false, reason: "refused", message: refusal },
    close: async () => {},
  };
}

type Slot = { uid: number | undefined };

/** The state of one checker: its command line, its free slots and the checks running. */
interface Checker {
  python: Config["python"];
  logger: Logger;
  clock: Clock;
  command: string;
  args: string[];
  /** Popped from the end: the first uid first. */
  free: Slot[];
  waiting: ((slot: Slot) => void)[];
  live: Set<{ child: ChildProcess; done: Promise<unknown> }>;
  closed: boolean;
}

export function createSyntaxChecker(o: {
  python: Config["python"];
  sandbox: Exclude<SandboxKind, "refused">;
  /**
   * Sandbox uids reserved for checks, one per concurrent check (so RLIMIT_NPROC binds per
   * check, and no task shares them); undefined when processes cannot switch uid.
   */
  uids: number[] | undefined;
  logger: Logger;
  clock: Clock;
}): SyntaxChecker {
  const { python } = o;
  const c: Checker = {
    python,
    logger: o.logger,
    clock: o.clock,
    ...checkerCommand(python, o.sandbox),
    free: (o.uids ?? Array.from({ length: python.check.concurrency }, () => undefined))
      .map((uid) => ({ uid }))
      .reverse(),
    waiting: [],
    live: new Set(),
    closed: false,
  };
  return {
    check: (files) => check(c, files),
    async close() {
      c.closed = true;
      for (const { child } of c.live) killGroup(child);
      await Promise.all([...c.live].map((e) => e.done));
    },
  };
}

/** The check needs neither a writable directory nor the network, whatever tasks may have. */
function checkerCommand(
  python: Config["python"],
  sandbox: Exclude<SandboxKind, "refused">,
): { command: string; args: string[] } {
  const pyArgs = ["-I", "-S", "-B"];
  if (sandbox !== "bwrap")
    return { command: python.executable, args: [...pyArgs, path.join(PYTHON_DIR, CHECKER)] };
  return {
    command: python.bwrap,
    args: [
      ...bwrapArgs({ executable: python.executable, zygoteDir: PYTHON_DIR, network: false }),
      python.executable,
      ...pyArgs,
      `${IN_SANDBOX.zygote}/${CHECKER}`,
    ],
  };
}

function acquire(c: Checker): Promise<Slot> {
  const slot = c.free.pop();
  return slot ? Promise.resolve(slot) : new Promise((resolve) => c.waiting.push(resolve));
}

function release(c: Checker, slot: Slot): void {
  const next = c.waiting.shift();
  if (next) next(slot);
  else c.free.push(slot);
}

const closing = (): Problem => ({
  ok: false,
  reason: "failed",
  message: "the service is shutting down; try again",
});

async function check(c: Checker, files: CheckedFile[]): Promise<SyntaxVerdict> {
  if (c.closed) return closing();
  if (files.length === 0) return { ok: true };
  const { fileBytes } = c.python.check;
  const big = files.find((f) => f.bytes.length > fileBytes);
  if (big) {
    return {
      ok: false,
      reason: "limit",
      file: big.name,
      message: `${big.bytes.length} bytes, over the limit of ${fileBytes} bytes for one Python file (LIMIT_PY_FILE_BYTES)`,
    };
  }
  const slot = await acquire(c);
  try {
    if (c.closed) return closing();
    return await run(c, files, slot.uid);
  } finally {
    release(c, slot);
  }
}

/** Starts the checker on `files` in a process group of its own, with a task's rlimits. */
function spawnCheck(
  c: Checker,
  files: CheckedFile[],
  uid: number | undefined,
): ChildProcessWithoutNullStreams {
  const { python } = c;
  const lim = {
    cpu: Math.ceil(python.check.timeoutMs / 1000) + 1,
    as: python.memoryBytes,
    fsize: python.fileSizeBytes,
    nofile: python.openFiles,
    // Only meaningful per uid: with a shared uid it would count the service's processes.
    nproc: uid !== undefined ? python.processes : 0,
  };
  // Its own process group (detached), so a timeout kills bwrap and the interpreter together.
  const child = spawn(c.command, [...c.args, JSON.stringify({ uid: uid ?? null, lim })], {
    env: { PATH: "/usr/local/bin:/usr/bin:/bin", LANG: "C.UTF-8" }, // never our secrets
    detached: true,
    stdio: ["pipe", "pipe", "pipe"],
  });
  // The checker stops reading at the first problem: the rest of the input meets a closed pipe.
  child.stdin.on("error", () => {});
  for (const f of files) {
    const header = { name: f.name, size: f.bytes.length, decode: f.decode === true };
    child.stdin.write(`${JSON.stringify(header)}\n`);
    child.stdin.write(f.bytes);
  }
  child.stdin.end();
  return child;
}

function run(c: Checker, files: CheckedFile[], uid: number | undefined): Promise<SyntaxVerdict> {
  const { timeoutMs } = c.python.check;
  const child = spawnCheck(c, files, uid);
  const out = { stdout: "", stderr: "", timedOut: false };
  child.stdout.setEncoding("utf8");
  child.stderr.setEncoding("utf8");
  child.stdout.on("data", (s: string) => {
    if (out.stdout.length < STDOUT_CAP) out.stdout += s;
  });
  child.stderr.on("data", (s: string) => {
    out.stderr = (out.stderr + s).slice(-STDERR_TAIL);
  });
  const timer = c.clock.setTimeout(() => {
    out.timedOut = true;
    killGroup(child);
  }, timeoutMs);
  const done = new Promise<SyntaxVerdict>((resolve) => {
    child.on("error", (err) => {
      c.clock.clearTimeout(timer);
      resolve({
        ok: false,
        reason: "failed",
        message: `the syntax check could not start: ${err.message}`,
      });
    });
    child.on("close", (code, signal) => {
      c.clock.clearTimeout(timer);
      resolve(c.closed ? closing() : verdictOf(c, files, out, code, signal));
    });
  });
  const entry = { child, done };
  c.live.add(entry);
  void done.then(() => c.live.delete(entry));
  return done;
}

function verdictOf(
  c: Checker,
  files: CheckedFile[],
  out: { stdout: string; stderr: string; timedOut: boolean },
  code: number | null,
  signal: NodeJS.Signals | null,
): SyntaxVerdict {
  // bwrap reports its child's death by signal N as exit status 128 + N.
  const sig = signal ?? (code !== null && code > 128 ? signalName(code - 128) : null);
  if (out.timedOut || sig === "SIGXCPU") {
    return {
      ok: false,
      reason: "limit",
      message: `checking it took longer than ${c.python.check.timeoutMs} ms (SCRIPT_CHECK_TIMEOUT_MS)`,
    };
  }
  const verdict = code === 0 ? parse(out.stdout, files) : undefined;
  if (verdict) return verdict;
  const how = sig ? `was ended by ${sig}` : `exited with status ${code}`;
  c.logger.warn({ code, signal: sig, stderr: out.stderr }, "python syntax check failed");
  const detail = lastLine(out.stderr);
  return {
    ok: false,
    reason: "failed",
    message: `the syntax check ${how}${detail ? `: ${detail}` : ""}`,
  };
}

function killGroup(child: ChildProcess): void {
  if (child.pid === undefined || child.exitCode !== null || child.signalCode !== null) return;
  try {
    process.kill(-child.pid, "SIGKILL");
  } catch {
    // already gone
  }
}

function signalName(n: number): string | null {
  const entry = Object.entries(constants.signals).find(([, v]) => v === n);
  return entry ? entry[0] : null;
}

function lastLine(text: string): string {
  return text.trim().split("\n").pop() ?? "";
}
