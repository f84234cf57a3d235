import type { Logger } from "pino";
import type { Clock } from "../clock.ts";
import type { Config } from "../config.ts";
import { type Locator, locateElement } from "../elements/locator.ts";
import { businessError, ErrorCode, SluiceError } from "../errors.ts";
import { newId } from "../ids.ts";
import type { RunQueue } from "../queue/types.ts";
import type { RunEvents } from "../runs/run-events.ts";
import { waitForRunEnd } from "../runs/wait.ts";
import {
  endedRun,
  insertStarted,
  type PendingRecord,
  recordEnd,
  SYNC_WRITE_BEHIND_MS,
} from "../runs/write-behind.ts";
import type { Run, RunEnd, Scope, ScopeFilter, Store, TriggerType } from "../store/types.ts";
import type { ScriptRunner, TaskOutcome } from "./runner-types.ts";

export interface TaskRequest {
  scope: Scope;
  user: string | null;
  locator: Locator;
  parameter: unknown;
  taskName?: string | undefined;
  trigger: TriggerType;
  /** The run that started this task (an error handler's failed run). */
  parentRunId?: string | null | undefined;
}

/** A run-sync's answer: the task as the store records it when the answer is made. */
export interface SyncTask {
  run: Run;
  /** The wait elapsed with the task unfinished, and `terminateOnTimeout` killed it. */
  killedOnTimeout: boolean;
}

export interface TaskService {
  /** Runs at once and waits up to `timeoutS` (undefined: the server's limit). */
  runSync(
    req: TaskRequest,
    wait: { timeoutS?: number | undefined; terminateOnTimeout: boolean },
  ): Promise<SyncTask>;
  /** Commits the task as QUEUED, queues it and returns its ID. */
  submit(req: TaskRequest): Promise<string>;
  /** Executes a queued task (the queue's worker side). */
  execute(runId: string): Promise<void>;
  /** The task once it ended, or as it stands when `timeoutS` elapsed. Undefined: no such task. */
  waitForEnd(scope: ScopeFilter, taskId: string, timeoutS: number): Promise<Run | undefined>;
  terminate(run: Run): Promise<boolean>;
}

interface Deps {
  config: Config;
  store: Store;
  runner: ScriptRunner;
  queue: RunQueue;
  events: RunEvents;
  clock: Clock;
  logger: Logger;
  nodeId: string;
}

export function createTaskService(deps: Deps): TaskService {
  const { store, runner, events, clock, config } = deps;

  /** A node without its script sandbox takes no task at all (docs/script-service.md). */
  function refuseWithoutSandbox(): void {
    if (runner.refusal !== undefined) throw businessError(runner.refusal);
  }

  async function newTask(req: TaskRequest, status: "QUEUED" | "STARTED") {
    const el = await locateElement(store, req.scope, req.locator, "PY");
    if (el.type !== "PY") throw new SluiceError(ErrorCode.ELEMENT_NOT_FOUND, [el.name]);
    const now = clock.now();
    const run = {
      id: newId(now),
      scope: req.scope,
      elementId: el.id,
      elementType: "PY" as const,
      elementName: el.name,
      folderId: el.folderId,
      version: null,
      triggerType: req.trigger,
      status,
      runName: req.taskName ?? el.name,
      runParam: JSON.stringify(req.parameter ?? null),
      initiator: req.user ? { userId: req.user } : null,
      parentRunId: req.parentRunId ?? null,
      inProcess: status === "STARTED",
      nodeId: status === "STARTED" ? deps.nodeId : null,
      createTime: now,
      startTime: status === "STARTED" ? now : null,
    };
    // A sync task is written by runSync (write-behind); a queued one before its ID is answered.
    if (status === "QUEUED") await store.insertRun(run);
    return run;
  }

  /**
   * Runs the script of a STARTED task and records its end; never throws. With `pending` the task
   * is not in the store yet (a run-sync within its write-behind grace) and its end is one insert.
   */
  async function runTask(
    runId: string,
    scope: Scope,
    elementId: string,
    parameter: unknown,
    pending?: PendingRecord,
  ): Promise<{ end: RunEnd; recorded: boolean }> {
    let end: RunEnd;
    try {
      const script = await store.scriptById(scope, elementId);
      if (!script) throw new Error("the script element was deleted before the task started");
      const outcome = await runner.run({
        taskId: runId,
        source: { name: script.name, kind: script.kind, content: script.content },
        parameter,
        timeoutMs: config.limits.maxRunS * 1000,
      });
      end = outcomeToEnd(outcome, clock.now(), config.limits.resultBytes);
    } catch (err) {
      const message = err instanceof Error ? err.message : String(err);
      end = { status: "FAILURE", endTime: clock.now(), summary: message, error: message };
    }
    let recorded = false;
    try {
      recorded = await recordEnd(store, pending, runId, end);
    } catch (err) {
      // The store failed: the task keeps its last recorded status. A run-sync still sees the
      // failed insert it awaits; a queued task's failure is logged here, not swallowed by the queue.
      deps.logger.error(
        { err, taskId: runId, status: end.status },
        "could not record a task's end",
      );
    }
    events.notify(runId);
    return { end, recorded };
  }

  async function waitForEnd(
    scope: ScopeFilter,
    taskId: string,
    timeoutS: number,
  ): Promise<Run | undefined> {
    const ms = Math.min(timeoutS, config.limits.maxWaitS) * 1000;
    const run = await waitForRunEnd({ store, events, clock }, scope, taskId, ms);
    return run?.elementType === "PY" ? run : undefined;
  }

  // A task that ended elsewhere (terminated through another node) while its process runs here.
  events.onEnd((runId) => runner.kill(runId, "terminate"));

  return {
    async runSync(req, wait) {
      refuseWithoutSandbox();
      const rec = await newTask(req, "STARTED");
      // Write-behind as in flow run-sync: no caller knows the ID yet, so a task that ends within
      // the grace is written once; a longer one is inserted STARTED when the grace elapses.
      const pending: PendingRecord = { rec, inserted: null };
      const grace = clock.setTimeout(() => insertStarted(store, pending), SYNC_WRITE_BEHIND_MS);
      const done = runTask(rec.id, req.scope, rec.elementId, req.parameter, pending);
      const waitS =
        wait.timeoutS && wait.timeoutS > 0
          ? Math.min(wait.timeoutS, config.limits.maxWaitS)
          : undefined;
      let timer: ReturnType<Clock["setTimeout"]> | undefined;
      const elapsed =
        waitS === undefined
          ? new Promise<null>(() => {})
          : new Promise<null>((resolve) => {
              timer = clock.setTimeout(() => resolve(null), waitS * 1000);
            });
      const outcome = await Promise.race([done, elapsed]);
      clock.clearTimeout(grace);
      if (timer) clock.clearTimeout(timer);
      if (outcome?.recorded) return { run: endedRun(rec, outcome.end), killedOnTimeout: false };
      pending.inserted ??= store.insertRun(rec);
      await pending.inserted;
      const ended = await store.getRun(req.scope, rec.id);
      if (!ended) throw new SluiceError(ErrorCode.TASK_NOT_FOUND, [rec.id]);
      if (isTerminal(ended) || !wait.terminateOnTimeout)
        return { run: ended, killedOnTimeout: false };
      runner.kill(rec.id, "timeout");
      await done;
      // The answer carries the status the kill ended in (docs/script-service.md), not STARTED.
      const killed = await store.getRun(req.scope, rec.id);
      if (!killed) throw new SluiceError(ErrorCode.TASK_NOT_FOUND, [rec.id]);
      return { run: killed, killedOnTimeout: true };
    },

    async submit(req) {
      refuseWithoutSandbox();
      if (deps.queue.depth() >= config.limits.queuedRuns) {
        throw new SluiceError(ErrorCode.TOO_MANY, [`queue holds ${config.limits.queuedRuns} runs`]);
      }
      const run = await newTask(req, "QUEUED");
      // Committed tasks are accepted: the bound was checked above, so it cannot refuse them now.
      await deps.queue.enqueue({ runId: run.id, kind: "script" }, { ignoreBound: true });
      return run.id;
    },

    async execute(runId) {
      const run = await store.getRun(null, runId);
      if (run?.status !== "QUEUED") return;
      if (!(await store.startRun(runId, clock.now(), deps.nodeId))) return;
      await runTask(runId, run.scope, run.elementId, JSON.parse(run.runParam ?? "null"));
    },

    waitForEnd,

    async terminate(run) {
      if (isTerminal(run)) return false;
      const ended = await store.endRun(run.id, {
        status: "CANCELED",
        endTime: clock.now(),
        summary: "terminated",
        error: "terminated by request",
      });
      if (ended) {
        runner.kill(run.id, "terminate");
        events.notify(run.id);
      }
      return ended;
    },
  };
}

export function isTerminal(run: Run): boolean {
  return run.status === "SUCCESS" || run.status === "FAILURE" || run.status === "CANCELED";
}

function outcomeToEnd(o: TaskOutcome, endTime: number, resultBytes: number): RunEnd {
  const base = { endTime, stdout: o.stdout, stderr: o.stderr };
  if (o.status === "SUCCESS") {
    const result = JSON.stringify(o.value ?? null);
    if (Buffer.byteLength(result) > resultBytes) {
      const error = `ResultTooLarge: the return value is ${Buffer.byteLength(result)} bytes, over the ${resultBytes} byte limit`;
      return { ...base, status: "FAILURE", summary: error, error };
    }
    return { ...base, status: "SUCCESS", result, summary: `returned ${result.length} bytes` };
  }
  const error = o.error ? `${o.error.type}: ${o.error.message}` : "the script failed";
  return { ...base, status: o.status, summary: error.split("\n")[0] ?? error, error };
}
