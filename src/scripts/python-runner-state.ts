/** The state of a started Python runner and of its tasks (python-runner-run.ts runs them). */
import type { Clock } from "../clock.ts";
import type { Config } from "../config.ts";
import type { EnvLease, EnvPools } from "./python-runner-envs.ts";
import type { Logger, SandboxKind } from "./python-runner-sandbox.ts";
import type { KillReason, RunningTask } from "./python-runner-task.ts";
import type { WorkDirs } from "./python-runner-workdir.ts";
import type { ZygotePool } from "./python-runner-zygote.ts";
import type { ScriptEnvs } from "./script-envs.ts";
import type { SyntaxChecker } from "./syntax-check.ts";
import type { TaskCgroups } from "./task-cgroups.ts";

export interface RunnerLimits {
  outputBytes: number;
  resultBytes: number;
  maxRunS: number;
}

/**
 * Where a task stands on its way to its child: it has its slot, its work dir, its child (not yet
 * told the task). Tests hold a task there (`Runner.pauseAt`) to kill the zygote at that point.
 */
export type TaskStep = "slot" | "workDir" | "child";

export interface TaskState {
  killReason?: KillReason;
  running?: RunningTask;
  /** The zygote its child comes from: the default one, or its environment's. */
  pool: ZygotePool;
  /** Its environment's zygote, held until the task's sweep (undefined: the default zygote). */
  lease?: EnvLease | undefined;
  /** How long it waited for its environment's zygote: part of its own time limit. */
  waitedMs: number;
  /** Ends its wait for its environment's zygote (a kill while it waits). */
  wake?: ((reason: KillReason) => void) | undefined;
}

/** The state of one started runner: what it opened, and the tasks it runs or holds back. */
export interface Runner {
  python: Config["python"];
  limits: RunnerLimits;
  logger: Logger;
  clock: Clock;
  sandbox: Exclude<SandboxKind, "refused">;
  uids: { base: number; count: number; release(): void };
  syntax: SyntaxChecker;
  dirs: WorkDirs;
  cgroups: TaskCgroups | undefined;
  /** The default zygote: tasks of elements without dependencies. */
  pool: ZygotePool;
  envs: ScriptEnvs;
  envPools: EnvPools;
  tasks: Map<string, TaskState>;
  /** Tasks waiting for a slot, first come first served. */
  queue: Array<() => void>;
  running: number;
  closed: boolean;
  /** Tests only: awaited at each step of every task (PythonRunnerDeps.pauseAt). */
  pauseAt?: (taskId: string, step: TaskStep) => Promise<void>;
}
