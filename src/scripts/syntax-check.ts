import { type ChildProcess, spawn } from "node:child_process";
import { constants } from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import type { Config } from "../config.ts";
import { bwrapArgs, IN_SANDBOX, type Logger, type SandboxKind } from "./python-runner-sandbox.ts";

const PYTHON_DIR = fileURLToPath(new URL("./python/", import.meta.url));
const CHECKER = "syntax_check.py";
const STDOUT_CAP = 64 * 1024;
const STDERR_TAIL = 2048;

export interface CheckedFile {
  /** The name compile() sees, and messages give. */
  name: string;
  /** Exactly the bytes the task will load. */
  bytes: Uint8Array;
  /** Loaded as text decoded strictly as UTF-8 (a package's main.py), not compiled as bytes. */
  decode?: boolean;
}

export type SyntaxVerdict =
  | { ok: true }
  | {
      ok: false;
      /**
       * `syntax`: the file does not compile (`line` when Python names one); `limit`: over the
       * .py size limit, or the check ran out of its memory or time; `refused`: no sandbox to
       * check in; `failed`: the check itself broke.
       */
      reason: "syntax" | "limit" | "refused" | "failed";
      file?: string;
      line?: number;
      message: string;
    };

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

export function createSyntaxChecker(o: {
  python: Config["python"];
  sandbox: Exclude<SandboxKind, "refused">;
  /**
   * Sandbox uids reserved for checks, one per concurrent check (so RLIMIT_NPROC binds per
   * check, and no task shares them); undefined when processes cannot switch uid.
   */
  uids: number[] | undefined;
  logger: Logger;
}): SyntaxChecker {
  const { python, logger } = o;
  const { fileBytes, timeoutMs } = python.check;
  const pyArgs = ["-I", "-S", "-B"];
  // The check needs neither a writable directory nor the network, whatever tasks may have.
  const [command, args] =
    o.sandbox === "bwrap"
      ? [
          python.bwrap,
          [
            ...bwrapArgs({ executable: python.executable, zygoteDir: PYTHON_DIR, network: false }),
            python.executable,
            ...pyArgs,
            `${IN_SANDBOX.zygote}/${CHECKER}`,
          ],
        ]
      : [python.executable, [...pyArgs, path.join(PYTHON_DIR, CHECKER)]];
  const env = { PATH: "/usr/local/bin:/usr/bin:/bin", LANG: "C.UTF-8" }; // never our secrets

  type Slot = { uid: number | undefined };
  const free: Slot[] = (o.uids ?? Array.from({ length: python.check.concurrency }, () => undefined))
    .map((uid) => ({ uid }))
    .reverse(); // popped from the end: the first uid first
  const waiting: ((slot: Slot) => void)[] = [];
  const live = new Set<{ child: ChildProcess; done: Promise<unknown> }>();
  let closed = false;

  const acquire = (): Promise<Slot> => {
    const slot = free.pop();
    return slot ? Promise.resolve(slot) : new Promise((resolve) => waiting.push(resolve));
  };
  const release = (slot: Slot): void => {
    const next = waiting.shift();
    if (next) next(slot);
    else free.push(slot);
  };
  const closing = (): Problem => ({
    ok: false,
    reason: "failed",
    message: "the service is shutting down; try again",
  });

  function run(files: CheckedFile[], uid: number | undefined): Promise<SyntaxVerdict> {
    const lim = {
      cpu: Math.ceil(timeoutMs / 1000) + 1,
      as: python.memoryBytes,
      fsize: python.fileSizeBytes,
      nofile: python.openFiles,
      // Only meaningful per uid: with a shared uid it would count the service's processes.
      nproc: uid !== undefined ? python.processes : 0,
    };
    // Its own process group (detached), so a timeout kills bwrap and the interpreter together.
    const child = spawn(command, [...args, JSON.stringify({ uid: uid ?? null, lim })], {
      env,
      detached: true,
      stdio: ["pipe", "pipe", "pipe"],
    });
    let stdout = "";
    let stderr = "";
    let timedOut = false;
    child.stdout.setEncoding("utf8");
    child.stderr.setEncoding("utf8");
    child.stdout.on("data", (s: string) => {
      if (stdout.length < STDOUT_CAP) stdout += s;
    });
    child.stderr.on("data", (s: string) => {
      stderr = (stderr + s).slice(-STDERR_TAIL);
    });
    // The checker stops reading at the first problem: the rest of the input meets a closed pipe.
    child.stdin.on("error", () => {});
    for (const f of files) {
      const header = { name: f.name, size: f.bytes.length, decode: f.decode === true };
      child.stdin.write(`${JSON.stringify(header)}\n`);
      child.stdin.write(f.bytes);
    }
    child.stdin.end();
    const timer = setTimeout(() => {
      timedOut = true;
      killGroup(child);
    }, timeoutMs);

    const done = new Promise<SyntaxVerdict>((resolve) => {
      child.on("error", (err) => {
        clearTimeout(timer);
        resolve({
          ok: false,
          reason: "failed",
          message: `the syntax check could not start: ${err.message}`,
        });
      });
      child.on("close", (code, signal) => {
        clearTimeout(timer);
        if (closed) return resolve(closing());
        // bwrap reports its child's death by signal N as exit status 128 + N.
        const sig = signal ?? (code !== null && code > 128 ? signalName(code - 128) : null);
        if (timedOut || sig === "SIGXCPU") {
          return resolve({
            ok: false,
            reason: "limit",
            message: `checking it took longer than ${timeoutMs} ms (SCRIPT_CHECK_TIMEOUT_MS)`,
          });
        }
        const verdict = code === 0 ? parse(stdout, files) : undefined;
        if (verdict) return resolve(verdict);
        const how = sig ? `was ended by ${sig}` : `exited with status ${code}`;
        logger.warn({ code, signal: sig, stderr }, "python syntax check failed");
        const detail = lastLine(stderr);
        resolve({
          ok: false,
          reason: "failed",
          message: `the syntax check ${how}${detail ? `: ${detail}` : ""}`,
        });
      });
    });
    const entry = { child, done };
    live.add(entry);
    void done.then(() => live.delete(entry));
    return done;
  }

  function parse(stdout: string, files: CheckedFile[]): SyntaxVerdict | undefined {
    let out: {
      ok?: boolean;
      index?: number;
      kind?: string;
      line?: number | null;
      message?: string;
    };
    try {
      out = JSON.parse(stdout.trim().split("\n").pop() ?? "");
    } catch {
      return undefined;
    }
    if (out.ok === true) return { ok: true };
    const file = files[out.index ?? -1]?.name;
    if (file === undefined || typeof out.message !== "string") return undefined;
    if (out.kind === "memory") {
      return {
        ok: false,
        reason: "limit",
        file,
        message: `out of memory: ${out.message}, the memory limit of a script (SCRIPT_MEMORY_BYTES)`,
      };
    }
    return typeof out.line === "number"
      ? { ok: false, reason: "syntax", file, line: out.line, message: out.message }
      : { ok: false, reason: "syntax", file, message: out.message };
  }

  return {
    async check(files) {
      if (closed) return closing();
      if (files.length === 0) return { ok: true };
      const big = files.find((f) => f.bytes.length > fileBytes);
      if (big) {
        return {
          ok: false,
          reason: "limit",
          file: big.name,
          message: `${big.bytes.length} bytes, over the limit of ${fileBytes} bytes for one Python file (LIMIT_PY_FILE_BYTES)`,
        };
      }
      const slot = await acquire();
      try {
        if (closed) return closing();
        return await run(files, slot.uid);
      } finally {
        release(slot);
      }
    },
    async close() {
      closed = true;
      for (const { child } of live) killGroup(child);
      await Promise.all([...live].map((e) => e.done));
    },
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
