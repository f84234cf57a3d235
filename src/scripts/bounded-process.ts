import { spawn } from "node:child_process";
import type { Clock } from "../clock.ts";

export interface Finished {
  code: number | null;
  signal: NodeJS.Signals | null;
  /** The first `outputBytes` of each stream; the rest was read and dropped. */
  stdout: string;
  stderr: string;
  timedOut: boolean;
  /** Could not be started at all (ENOENT...). */
  error?: string;
}

/**
 * Runs a program to its end with a time limit (its whole process group killed past it) and
 * bounded output, in an environment of only `env`: used for the builds of environments, which
 * run outside the task sandbox (docs/script-dependencies.md, "Building").
 */
export function runBounded(
  command: string,
  args: string[],
  o: {
    env: Record<string, string>;
    cwd: string;
    timeoutMs: number;
    outputBytes: number;
    clock: Clock;
  },
): Promise<Finished> {
  return new Promise((resolve) => {
    const proc = spawn(command, args, {
      env: o.env,
      cwd: o.cwd,
      stdio: ["ignore", "pipe", "pipe"],
      detached: true,
    });
    const keep = { stdout: [] as Buffer[], stderr: [] as Buffer[] };
    const kept = { stdout: 0, stderr: 0 };
    for (const name of ["stdout", "stderr"] as const) {
      proc[name].on("data", (b: Buffer) => {
        const room = o.outputBytes - kept[name];
        if (room <= 0) return;
        keep[name].push(b.subarray(0, room));
        kept[name] += Math.min(room, b.length);
      });
    }
    let timedOut = false;
    const timer = o.clock.setTimeout(() => {
      timedOut = true;
      killGroup(proc.pid);
    }, o.timeoutMs);
    let error: string | undefined;
    proc.once("error", (err) => {
      error = err.message;
    });
    proc.once("close", (code, signal) => {
      o.clock.clearTimeout(timer);
      killGroup(proc.pid); // nothing it started outlives it
      resolve({
        code,
        signal,
        stdout: Buffer.concat(keep.stdout).toString("utf8"),
        stderr: Buffer.concat(keep.stderr).toString("utf8"),
        timedOut,
        ...(error !== undefined ? { error } : {}),
      });
    });
  });
}

function killGroup(pid: number | undefined): void {
  if (pid === undefined) return;
  try {
    process.kill(-pid, "SIGKILL");
  } catch {
    // already gone
  }
}
