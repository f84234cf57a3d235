import type { Clock } from "../clock.ts";
import { type Locator, locateElement } from "../elements/locator.ts";
import { ErrorCode, SluiceError } from "../errors.ts";
import { newId } from "../ids.ts";
import {
  createRunLifecycle,
  type ExecRun,
  type LifecycleDeps,
  type RunExecutor,
  type SyncRun,
  type SyncWait,
} from "../runs/lifecycle.ts";
import { type Execution, type Outcome, RunStop } from "../runs/outcome.ts";
import type { Secrets } from "../secrets/secrets.ts";
import { taskSecrets } from "../secrets/task-env.ts";
import type { NewRun, RerunLink, Run, Scope, ScopeFilter, TriggerType } from "../store/types.ts";
import { runTargets } from "../webhooks/targets.ts";
import type { WebhookTarget } from "../webhooks/types.ts";
import type { ScriptRunner, ScriptSource, TaskOutcome } from "./runner-types.ts";
import { scriptHeader } from "./script-header.ts";
import { errorLine, tracebackOf } from "./traceback.ts";

export interface TaskRequest {
  scope: Scope;
  user: string | null;
  locator: Locator;
  parameter: unknown;
  taskName?: string | undefined;
  trigger: TriggerType;
  /** The run that started this task (an error handler's failed run). */
  parentRunId?: string | null | undefined;
  /** A re-run of an earlier task (docs/dataflow-service.md, "Re-run and resume"). */
  rerunOf?: RerunLink | undefined;
  /** A script version to run; absent: the newest (docs/script-service.md, "Script versions"). */
  version?: number | undefined;
  /** The call's own completion webhook (docs/webhooks.md). */
  callback?: WebhookTarget | undefined;
  /** The task's ID, chosen before it is prepared (an idempotent start claims its key with it). */
  runId?: string | undefined;
}

/** A run-sync's answer: the task as the store records it when the answer is made. */
export type SyncTask = SyncRun;

export interface TaskService {
  /** Runs at once and waits up to `timeoutS` (absent: until the end), bounded by MAX_WAIT_S. */
  runSync(req: TaskRequest, wait: SyncWait): Promise<SyncTask>;
  /** Commits the task as QUEUED, queues it and returns its ID. */
  submit(req: TaskRequest): Promise<string>;
  /** Executes a queued task (the queue's worker side). */
  execute(runId: string): Promise<void>;
  /**
   * The task once it ended, or as it stands when `timeoutS` elapsed or `gone` aborted (the
   * caller's client went). Undefined: no such task.
   */
  waitForEnd(
    scope: ScopeFilter,
    taskId: string,
    timeoutS: number,
    gone?: AbortSignal,
  ): Promise<Run | undefined>;
  terminate(run: Run): Promise<boolean>;
}

export type TaskServiceDeps = Omit<LifecycleDeps, "notFound"> & {
  runner: ScriptRunner;
  clock: Clock;
  /** Told of every Python execution's outcome (metrics). */
  onScript?: ((o: TaskOutcome) => void) | undefined;
  /** The secrets an element declares it reads (docs/secrets.md); absent: none resolve. */
  secrets?: Secrets | undefined;
};

/**
 * Script tasks (docs/script-service.md): the executor of a PY element in the runner's sandbox,
 * inside the one run lifecycle (runs/lifecycle.ts), which owns statuses, queueing, waits and limits.
 */
export function createTaskService(deps: TaskServiceDeps): TaskService {
  const { runner } = deps;
  const executor: RunExecutor<TaskRequest> = {
    kind: "script",
    // A node without its script sandbox takes no task at all (docs/script-service.md).
    admit() {
      if (runner.refusal !== undefined) throw new SluiceError(ErrorCode.BUSINESS, [runner.refusal]);
    },
    prepare: (req, status, inProcess) => prepare(deps, req, status, inProcess),
    execute: (r, parameter, signal) => execute(deps, r, parameter, signal),
  };
  const lifecycle = createRunLifecycle({ ...deps, notFound: ErrorCode.TASK_NOT_FOUND }, executor);

  return {
    runSync: lifecycle.runSync,
    submit: (req) => lifecycle.start(req),
    execute: lifecycle.execute,
    async waitForEnd(scope, taskId, timeoutS, gone) {
      const run = await lifecycle.waitForEnd(scope, taskId, timeoutS, gone);
      return run?.elementType === "PY" ? run : undefined;
    },
    terminate: lifecycle.terminate,
  };
}

async function prepare(
  deps: TaskServiceDeps,
  req: TaskRequest,
  status: "QUEUED" | "STARTED",
  inProcess: boolean,
): Promise<NewRun> {
  const { store } = deps;
  const el = await locateElement(store, req.scope, req.locator, "PY");
  if (el.type !== "PY") throw new SluiceError(ErrorCode.ELEMENT_NOT_FOUND, [el.name]);
  // The task records the version it runs, so a queued task runs what it was accepted with.
  const version =
    req.version === undefined
      ? await store.newestScriptVersion(el.id)
      : (await store.scriptVersion(el.id, req.version))?.version;
  if (version === undefined && req.version !== undefined)
    throw new SluiceError(ErrorCode.SCRIPT_VERSION_NOT_FOUND, [el.name, String(req.version)]);
  const limit = await declaredLimit(store, req.scope, el.id, version);
  const now = deps.clock.now();
  return {
    id: req.runId ?? newId(now),
    scope: req.scope,
    elementId: el.id,
    elementType: "PY",
    elementName: el.name,
    folderId: el.folderId,
    version: version === undefined ? null : String(version),
    triggerType: req.trigger,
    status,
    runName: req.taskName ?? el.name,
    runParam: JSON.stringify(req.parameter ?? null),
    initiator: req.user ? { userId: req.user } : null,
    parentRunId: req.parentRunId ?? null,
    rerunOf: req.rerunOf ?? null,
    inProcess,
    nodeId: status === "STARTED" ? deps.nodeId : null,
    createTime: now,
    startTime: status === "STARTED" ? now : null,
    webhooks: runTargets(undefined, req.callback),
    runLimit: limit ?? null,
  };
}

/**
 * The element's `# sluice-max-concurrent-runs` in the version the task will run (docs/run-limits.md):
 * versions are immutable and cached in memory in both modes, and their header is parsed once.
 */
async function declaredLimit(
  store: TaskServiceDeps["store"],
  scope: Scope,
  elementId: string,
  version: number | undefined,
): Promise<number | undefined> {
  const source =
    version === undefined
      ? await store.scriptById(scope, elementId)
      : await store.scriptVersion(elementId, version);
  return source ? (await scriptHeader(source)).maxConcurrentRuns : undefined;
}

async function execute(
  deps: TaskServiceDeps,
  r: ExecRun,
  parameter: unknown,
  signal: AbortSignal,
): Promise<Execution> {
  const { runner } = deps;
  const script = await taskSource(deps.store, r);
  const given = await taskSecrets(script, deps.secrets?.resolver(r.scope), undefined);
  // A stop from the lifecycle kills the task's process group; the runner answers the outcome.
  const onAbort = () => {
    const stop: unknown = signal.reason;
    runner.kill(
      r.id,
      stop instanceof RunStop && stop.reason === "terminate" ? "terminate" : "timeout",
    );
  };
  signal.addEventListener("abort", onAbort, { once: true });
  try {
    const outcome = await runner.run({
      taskId: r.id,
      source: script,
      parameter,
      ...given,
      // The lifecycle's system limit stops the task first; this is the runner's backstop.
      timeoutMs: deps.limits.maxRunS * 1000 + 1000,
      onOutput: (stream, text) =>
        deps.events.publish({
          type: "progress",
          runId: r.id,
          progress: { kind: "output", stream, text },
        }),
    });
    deps.onScript?.(outcome);
    return { outcome: taskOutcome(stoppedBy(outcome, signal)) };
  } finally {
    signal.removeEventListener("abort", onAbort);
  }
}

/** The bytes a task runs: the version it recorded (a script stored before versions: its element's). */
async function taskSource(store: TaskServiceDeps["store"], r: ExecRun): Promise<ScriptSource> {
  if (r.version === null) {
    const script = await store.scriptById(r.scope, r.elementId);
    if (!script) throw new Error("the script element was deleted before the task started");
    return { name: script.name, kind: script.kind, content: script.content };
  }
  const v = await store.scriptVersion(r.elementId, Number(r.version));
  if (!v) throw new Error(`version ${r.version} of script ${r.elementName} no longer exists`);
  return { name: r.elementName, kind: v.kind, content: v.content, env: v.env };
}

/**
 * A task the caller's wait killed (terminateOnTimeout) says so, and the wait's length, rather than
 * the runner's "task timed out", which reads as a limit of the task's own.
 */
function stoppedBy(o: TaskOutcome, signal: AbortSignal): TaskOutcome {
  const stop: unknown = signal.reason;
  if (!(stop instanceof RunStop) || stop.reason !== "timeout" || o.error?.type !== "Timeout")
    return o;
  return { ...o, error: { ...o.error, message: stop.message } };
}

function taskOutcome(o: TaskOutcome): Outcome {
  const out = { stdout: o.stdout, stderr: o.stderr };
  if (o.status === "SUCCESS") return { ...out, status: "SUCCESS", value: o.value };
  const error = o.error ? errorLine(o.error) : "the script failed";
  const traceback = tracebackOf(o.error);
  return { ...out, status: o.status, error, ...(traceback ? { detail: { traceback } } : {}) };
}
