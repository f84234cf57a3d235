import type { KillReason } from "./python-runner-task.ts";
import type { PythonRunner, ScriptRunner, TaskOutcome } from "./runner-types.ts";
import { refusingSyntaxChecker } from "./syntax-check.ts";

/** Outcomes the runner itself decides, and the runner of a node that runs no task. */

export function failure(type: string, message: string, durationMs = 0): TaskOutcome {
  return { status: "FAILURE", error: { type, message }, stdout: "", stderr: "", durationMs };
}

export function canceledBeforeStart(reason: KillReason): TaskOutcome {
  return reason === "terminate"
    ? {
        status: "CANCELED",
        error: { type: "Canceled", message: "task terminated" },
        stdout: "",
        stderr: "",
        durationMs: 0,
      }
    : failure("Timeout", "task timed out before it started");
}

/**
 * The kernel killed a process of the task for memory: whatever the task then reported, it failed
 * (docs/script-service.md, "Limits and isolation"). A terminated task stays CANCELED.
 */
export function overMemory(o: TaskOutcome, memoryBytes: number): TaskOutcome {
  if (o.status === "CANCELED") return o;
  const message =
    `task exceeded its memory limit of ${memoryBytes} bytes ` +
    "(all its processes together, shared memory included) and was killed";
  return {
    status: "FAILURE",
    error: { type: "MemoryLimit", message },
    stdout: o.stdout,
    stderr: o.stderr,
    durationMs: o.durationMs,
  };
}

/**
 * No isolation layer and none accepted explicitly (docs/script-service.md): every task fails at
 * once with the reason and the fix, and no Python process is ever started.
 */
export function refusingRunner(
  refusal: string,
  sandbox: ScriptRunner["sandbox"],
  cgroup: ScriptRunner["cgroup"],
  envs: PythonRunner["envs"],
): PythonRunner {
  return {
    sandbox,
    cgroup,
    refusal,
    envs,
    zygotePid: () => undefined,
    syntax: refusingSyntaxChecker(refusal),
    run: async () => failure("SandboxUnavailable", refusal),
    kill: () => false,
    stats: () => ({ running: 0, idle: 0, queued: 0 }),
    close: async () => {},
  };
}
