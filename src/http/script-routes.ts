import type { TypeBoxTypeProvider } from "@fastify/type-provider-typebox";
import type { FastifyInstance, FastifyReply, FastifyRequest } from "fastify";
import { Type } from "typebox";
import type { Config } from "../config.ts";
import { ErrorCode, SluiceError } from "../errors.ts";
import type { Idempotency } from "../runs/idempotency.ts";
import type { SyncWait } from "../runs/lifecycle-types.ts";
import type { SyncTask, TaskRequest, TaskService } from "../scripts/task-service.ts";
import type { Run } from "../store/types.ts";
import { AnyEnvelope, Envelope, ok, okJson } from "./envelope.ts";
import { type HeldQuota, heldWait } from "./held-quota.ts";
import { awaitRetried, startedId, startOnce } from "./idempotency.ts";
import { externalRequest, internalRequest } from "./script-requests.ts";
import {
  ExternalParams,
  ExternalRunQuery,
  ExternalRunSyncQuery,
  InternalRunBody,
  InternalRunSyncBody,
  Lifespan,
  ScriptParameterBody,
  TaskParams,
  WaitQuery,
} from "./script-schemas.ts";
import type { TypedApp } from "./typed-app.ts";

/** What the script routes are built from. */
interface ScriptDeps {
  config: Config;
  tasks: TaskService;
  idempotency: Idempotency;
  /** Waiting requests per app and node (docs/live-progress.md#bounds). */
  held: HeldQuota;
}

/** Script service endpoints 15–20: external and internal runs, result and lifespan lookups. */
export async function scriptRoutes(fastify: FastifyInstance, opts: ScriptDeps): Promise<void> {
  const app = fastify.withTypeProvider<TypeBoxTypeProvider>();
  registerExternalRunSync(app, opts);
  registerExternalRun(app, opts);
  registerInternalRunSync(app, opts);
  registerInternalRun(app, opts);
  registerResult(app, opts);
  registerLifespan(app, opts);
}

/** POST /external/:elementName/run-sync: the bare return value, not an envelope. */
function registerExternalRunSync(app: TypedApp, deps: ScriptDeps): void {
  app.post(
    "/external/:elementName/run-sync",
    {
      config: { access: "external" },
      schema: {
        params: ExternalParams,
        querystring: ExternalRunSyncQuery,
        body: ScriptParameterBody,
        response: {
          200: Type.Unknown({ description: "the script's return value, or a failure envelope" }),
        },
      },
    },
    async (req, reply) => {
      const q = req.query;
      const { run, killedOnTimeout } = await runSyncOnce(
        deps,
        req,
        "POST /external/{elementName}/run-sync",
        { ...externalRequest(req, deps.config), trigger: "SYNC" },
        { timeoutS: q.timeout, terminateOnTimeout: q.terminateOnTimeout ?? false },
      );
      reply.header("x-task-id", run.id).header("x-task-status", run.status);
      assertSucceeded(run, killedOnTimeout);
      // The stored result is already JSON text: send it as is, no parse and re-stringify.
      return reply.type("application/json").send(run.result ?? "null");
    },
  );
}

function registerExternalRun(app: TypedApp, { tasks, config, idempotency }: ScriptDeps): void {
  app.post(
    "/external/:elementName/run",
    {
      config: { access: "external" },
      schema: {
        params: ExternalParams,
        querystring: ExternalRunQuery,
        body: ScriptParameterBody,
        response: { 200: Envelope(Type.String()) },
      },
    },
    async (req, reply) => {
      const request: TaskRequest = { ...externalRequest(req, config), trigger: "ASYNC" };
      const id = startedId(
        await startOnce(idempotency, req, "POST /external/{elementName}/run", request, (runId) =>
          tasks.submit({ ...request, runId }),
        ),
      );
      reply.header("x-task-id", id);
      return ok(id);
    },
  );
}

function registerInternalRunSync(app: TypedApp, deps: ScriptDeps): void {
  app.post(
    "/script/run-sync",
    {
      config: { access: "internal" },
      schema: { body: InternalRunSyncBody, response: { 200: AnyEnvelope } },
    },
    async (req, reply) => {
      const b = req.body;
      const { run, killedOnTimeout } = await runSyncOnce(
        deps,
        req,
        "POST /script/run-sync",
        { ...internalRequest(req), trigger: "SYNC" },
        { timeoutS: b.timeout, terminateOnTimeout: b.terminateOnTimeout ?? false },
      );
      reply.header("x-task-id", run.id).header("x-task-status", run.status);
      assertSucceeded(run, killedOnTimeout);
      return sendResultEnvelope(reply, run.result);
    },
  );
}

function registerInternalRun(app: TypedApp, { tasks, idempotency }: ScriptDeps): void {
  app.post(
    "/script/run",
    {
      config: { access: "internal" },
      schema: { body: InternalRunBody, response: { 200: Envelope(Type.String()) } },
    },
    async (req, reply) => {
      const request: TaskRequest = { ...internalRequest(req), trigger: "ASYNC" };
      const id = startedId(
        await startOnce(idempotency, req, "POST /script/run", request, (runId) =>
          tasks.submit({ ...request, runId }),
        ),
      );
      reply.header("x-task-id", id);
      return ok(id);
    },
  );
}

/**
 * A script run-sync through its `Idempotency-Key` (docs/idempotency.md): a retry awaits the first
 * call's task up to its own `timeout` and never kills it (only the call that started it does).
 */
async function runSyncOnce(
  { tasks, idempotency, held }: ScriptDeps,
  req: FastifyRequest,
  endpoint: string,
  request: TaskRequest,
  wait: SyncWait,
): Promise<SyncTask> {
  const settled = await startOnce(idempotency, req, endpoint, request, (runId) =>
    tasks.runSync({ ...request, runId }, wait),
  );
  if (settled.first) return settled.value;
  const run = await awaitRetried(settled, tasks.waitForEnd, { quota: held, req }, wait.timeoutS, {
    code: ErrorCode.TASK_NOT_FOUND,
    header: "x-task-id",
  });
  return { run, killedOnTimeout: false };
}

function registerResult(app: TypedApp, deps: ScriptDeps): void {
  app.get(
    "/script/result/:taskId",
    {
      config: { access: "lookup" },
      schema: { params: TaskParams, querystring: WaitQuery, response: { 200: AnyEnvelope } },
    },
    async (req, reply) => {
      const run = await lookup(deps, req, req.params.taskId, req.query.timeout ?? 0);
      reply.header("x-task-id", run.id).header("x-task-status", run.status);
      if (run.status === "FAILURE")
        throw new SluiceError(ErrorCode.SCRIPT_FAILED, [run.error ?? "script failed"]);
      if (run.status === "CANCELED") throw new SluiceError(ErrorCode.TASK_CANCELED, [run.id]);
      if (run.status !== "SUCCESS")
        throw new SluiceError(ErrorCode.TASK_NOT_FINISHED, [run.id, run.status]);
      return sendResultEnvelope(reply, run.result);
    },
  );
}

function registerLifespan(app: TypedApp, deps: ScriptDeps): void {
  app.get(
    "/script/lifespan/:taskId",
    {
      config: { access: "lookup" },
      schema: { params: TaskParams, querystring: WaitQuery, response: { 200: Envelope(Lifespan) } },
    },
    async (req, reply) => {
      const run = await lookup(deps, req, req.params.taskId, req.query.timeout ?? 0);
      reply.header("x-task-id", run.id).header("x-task-status", run.status);
      if (run.status === "QUEUED" || run.status === "STARTED") {
        throw new SluiceError(ErrorCode.TASK_NOT_FINISHED, [run.id, run.status]);
      }
      return ok({
        success: run.status === "SUCCESS",
        retval: run.result == null ? null : JSON.parse(run.result),
        stdout: run.stdout ?? "",
        stderr: stderrWithError(run),
      });
    },
  );
}

/** Lifespan `stderr` is the error text: the script's own stderr, then why it failed. */
function stderrWithError(run: Run): string {
  const own = run.stderr ?? "";
  if (run.status === "SUCCESS" || !run.error || own.includes(run.error)) return own;
  return own ? `${own}${own.endsWith("\n") ? "" : "\n"}${run.error}` : run.error;
}

async function lookup(
  { tasks, held }: ScriptDeps,
  req: FastifyRequest,
  taskId: string,
  timeoutS: number,
): Promise<Run> {
  const { scope } = req.ctx;
  // A lookup that waits is one of the caller's waiting requests; one that does not is not.
  const run =
    timeoutS > 0
      ? await heldWait(held, req, (gone) => tasks.waitForEnd(scope, taskId, timeoutS, gone))
      : await tasks.waitForEnd(scope, taskId, 0);
  if (!run) throw new SluiceError(ErrorCode.TASK_NOT_FOUND, [taskId]);
  return run;
}

/**
 * Maps an unsuccessful task to its failure envelope (docs/errors.md, docs/script-service.md). A task killed because the
 * wait elapsed answers the timeout (28030002, docs/errors.md) with the status it ended in.
 */
export function assertSucceeded(run: Run, killedOnTimeout: boolean): void {
  const headers = { "x-task-id": run.id, "x-task-status": run.status };
  if (killedOnTimeout && run.status === "FAILURE")
    throw new SluiceError(ErrorCode.SCRIPT_TIMEOUT, [run.id, "was killed"], headers);
  switch (run.status) {
    case "SUCCESS":
      return;
    case "FAILURE":
      throw new SluiceError(ErrorCode.SCRIPT_FAILED, [run.error ?? "script failed"], headers);
    case "CANCELED":
      throw new SluiceError(ErrorCode.TASK_CANCELED, [run.id], headers);
    default:
      throw new SluiceError(
        ErrorCode.SCRIPT_TIMEOUT,
        [run.id, "goes on; fetch its result by task ID"],
        headers,
      );
  }
}

function sendResultEnvelope(reply: FastifyReply, resultJson: string | null): FastifyReply {
  return reply.type("application/json").send(okJson(resultJson));
}

// Kept importable from here, where it was first exported; it lives with the request building.
export { decodeParameter } from "./script-requests.ts";
