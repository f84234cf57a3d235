/** What the rest of Sluice knows about executing Python: one task in, one outcome out. */

import type { ScriptEnv } from "../store/revision-types.ts";
import type { FinishedStatus } from "../store/types.ts";
import type { TaskError } from "./python-runner-output.ts";
import type { ScriptEnvs } from "./script-envs.ts";
import type { SyntaxChecker } from "./syntax-check.ts";

export interface ScriptSource {
  /** Module name the script is registered under in `sys.modules` (the element name). */
  name: string;
  /** `module`: `content` is UTF-8 Python text. `package`: `content` is zip bytes (docs/script-service.md). */
  kind: "module" | "package";
  content: Uint8Array;
  /** The environment of its version's dependencies; absent: the default zygote's interpreter. */
  env?: ScriptEnv | null | undefined;
}

export interface TaskSpec {
  taskId: string;
  source: ScriptSource;
  /** Passed to `main` per docs/script-service.md. Must be JSON-serialisable. */
  parameter: unknown;
  /**
   * Name of the working directory under the runner's tasks root. Tasks that share a name (the
   * script nodes of one flow run) share the directory and its sandbox uid. Default: taskId.
   */
  workDirName?: string;
  /** Keep the working directory after the task ends (flows decide cleanup themselves). */
  keepWorkDir?: boolean;
  /** Hard limit in ms; past it the process group is killed and the task ends FAILURE. */
  timeoutMs?: number;
  /** Environment variables of the task (secrets among them: docs/secrets.md). */
  env?: Record<string, string>;
  /** Secret values the task was given: masked in its outcome before anyone records it. */
  mask?: readonly string[];
  /** Told stdout and stderr as the task prints them, masked (docs/live-progress.md). */
  onOutput?: ((stream: "stdout" | "stderr", text: string) => void) | undefined;
}

export type TaskStatus = FinishedStatus;

export interface TaskOutcome {
  status: TaskStatus;
  /** The JSON value `main` returned (SUCCESS only). */
  value?: unknown;
  /** FAILURE/CANCELED: `type` is the exception type or a runner reason (Timeout, Killed, ...). */
  error?: TaskError;
  stdout: string;
  stderr: string;
  durationMs: number;
}

export interface ScriptRunner {
  /**
   * Which isolation is in force: bubblewrap, uid drop + rlimits only, nothing but rlimits (not
   * root), or `refused`: no isolation layer works and none was accepted, so every task fails.
   */
  readonly sandbox: "bwrap" | "uid" | "none" | "refused";
  /**
   * The cgroup of each task: `v2` or `v1`; `off` (none, accepted with SCRIPT_CGROUP=off);
   * `refused`: none can be created and none was accepted, so every task fails.
   */
  readonly cgroup: "v2" | "v1" | "off" | "refused";
  /** When tasks are refused: why no task runs and how to fix it (also the error of every task). */
  readonly refusal: string | undefined;
  run(spec: TaskSpec): Promise<TaskOutcome>;
  /** Kill a running task's whole process group. `terminate` → CANCELED, `timeout` → FAILURE. */
  kill(taskId: string, reason: "terminate" | "timeout"): boolean;
  stats(): { running: number; idle: number; queued: number; envZygotes?: number };
  close(): Promise<void>;
}

/** The local Python runner: a ScriptRunner that also checks syntax in the task sandbox. */
export interface PythonRunner extends ScriptRunner {
  /** Host pid of the zygote (for diagnostics and tests). */
  zygotePid(): number | undefined;
  /** The upload and deploy syntax check, in the same sandbox as tasks (or refused with them). */
  readonly syntax: SyntaxChecker;
  /** Environments of elements' dependencies on this node (docs/script-dependencies.md). */
  readonly envs: ScriptEnvs;
}
