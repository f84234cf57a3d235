import type { TypeBoxTypeProvider } from "@fastify/type-provider-typebox";
import type { FastifyInstance, FastifyReply } from "fastify";
import { Type } from "typebox";
import type { Locator } from "../elements/locator.ts";
import { badRequest, ErrorCode, SluiceError } from "../errors.ts";
import type { FlowRuns } from "../runs/flow-runs.ts";
import type { Idempotency } from "../runs/idempotency.ts";
import type { TaskService } from "../scripts/task-service.ts";
import type { Run, Scope, Store } from "../store/types.ts";
import type { StoredQuota } from "../stored-quota.ts";
import { scopeOf } from "./context.ts";
import { AnyEnvelope, Envelope, ok, okJson } from "./envelope.ts";
import {
  RunBody,
  RunIdMap,
  RunIdParams,
  RunIdsBody,
  RunSyncBody,
  WaitQuery,
} from "./flow-schemas.ts";
import { type HeldQuota, heldWait } from "./held-quota.ts";
import { awaitRetried, startedId, startOnce } from "./idempotency.ts";
import type { TypedApp } from "./typed-app.ts";
import { callbackOf } from "./webhook-schemas.ts";

/** What the run routes are built from. */
interface RunDeps {
  flows: FlowRuns;
  tasks: TaskService;
  store: Store;
  idempotency: Idempotency;
  /** Waiting requests per app and node (docs/live-progress.md#bounds). */
  held: HeldQuota;
  /** Forgets an app's stored bytes once a delete freed some (docs/security.md). */
  stored?: Pick<StoredQuota, "forget"> | undefined;
}

/** Endpoints 1–5: start, result, run-sync, terminate, delete. */
export async function runRoutes(fastify: FastifyInstance, opts: RunDeps): Promise<void> {
  const app = fastify.withTypeProvider<TypeBoxTypeProvider>();
  registerStart(app, opts);
  registerResult(app, opts);
  registerRunSync(app, opts);
  registerTerminate(app, opts);
  registerDelete(app, opts);
}

/**
 * POST /run: starts a flow run and answers its ID without waiting for its end; a retry with the
 * same `Idempotency-Key` answers the first call's ID (docs/idempotency.md).
 */
function registerStart(app: TypedApp, { flows, store, idempotency }: RunDeps): void {
  app.post(
    "/run",
    {
      config: { access: "context" },
      schema: { body: RunBody, response: { 200: Envelope(Type.String()) } },
    },
    async (req, reply) => {
      const b = req.body;
      const request = {
        scope: scopeOf(req),
        user: req.ctx.user,
        locator: locatorOf(b),
        parameter: b.parameter ?? {},
        inProcess: b.inProcess ?? false,
        parentRunId: await parentOf(store, req.ctx.scope, b.parentRunId),
        trigger: "ASYNC" as const,
        callback: callbackOf(b, "body"),
      };
      const id = startedId(
        await startOnce(idempotency, req, "POST /run", request, (runId) =>
          flows.start({ ...request, runId }),
        ),
      );
      reply.header("x-run-id", id);
      return ok(id);
    },
  );
}

function registerResult(app: TypedApp, { flows, held }: RunDeps): void {
  app.get(
    "/run/:runId/result",
    {
      config: { access: "contextEnv" },
      schema: { params: RunIdParams, querystring: WaitQuery, response: { 200: AnyEnvelope } },
    },
    async (req, reply) => {
      const { scope } = req.ctx;
      const timeoutS = req.query.timeout ?? 0;
      // A poll that waits is one of the caller's waiting requests; one that does not is not.
      const run =
        timeoutS > 0
          ? await heldWait(held, req, (gone) =>
              flows.waitForEnd(scope, req.params.runId, timeoutS, gone),
            )
          : await flows.waitForEnd(scope, req.params.runId, 0);
      if (run?.elementType !== "DPL")
        throw new SluiceError(ErrorCode.RUN_NOT_FOUND, [req.params.runId]);
      reply.header("x-run-id", run.id);
      if (run.status === "QUEUED" || run.status === "STARTED") {
        throw new SluiceError(ErrorCode.RUN_NOT_FINISHED, [run.id, run.status], {
          "x-run-id": run.id,
        });
      }
      return sendRunResult(reply, run);
    },
  );
}

/** POST /run-sync; a retry with the same `Idempotency-Key` awaits the first call's run. */
function registerRunSync(app: TypedApp, { flows, store, idempotency, held }: RunDeps): void {
  app.post(
    "/run-sync",
    {
      config: { access: "context" },
      schema: { body: RunSyncBody, response: { 200: AnyEnvelope } },
    },
    async (req, reply) => {
      const b = req.body;
      const request = {
        scope: scopeOf(req),
        user: req.ctx.user,
        locator: locatorOf(b),
        parameter: b.parameter ?? {},
        parentRunId: await parentOf(store, req.ctx.scope, b.parentRunId),
        callback: callbackOf(b, "body"),
      };
      const settled = await startOnce(idempotency, req, "POST /run-sync", request, (runId) =>
        flows.runSync({ ...request, runId }, b.timeout),
      );
      const run = settled.first
        ? settled.value
        : await awaitRetried(settled, flows.waitForEnd, { quota: held, req }, b.timeout, {
            code: ErrorCode.RUN_NOT_FOUND,
            header: "x-run-id",
          });
      reply.header("x-run-id", run.id);
      if (run.status === "QUEUED" || run.status === "STARTED") {
        throw new SluiceError(ErrorCode.RUN_WAIT_ELAPSED, [run.id, run.status], {
          "x-run-id": run.id,
        });
      }
      return sendRunResult(reply, run);
    },
  );
}

/** Terminates flow runs and script tasks alike: the run says which it is. */
function registerTerminate(app: TypedApp, { flows, tasks, store }: RunDeps): void {
  app.post(
    "/run/terminate",
    {
      config: { access: "contextEnv" },
      schema: { body: RunIdsBody, response: { 200: Envelope(RunIdMap) } },
    },
    async (req) => {
      const out: Record<string, boolean> = {};
      for (const id of req.body.runIds) {
        const run = await store.getRun(req.ctx.scope, id);
        out[id] = run
          ? await (run.elementType === "PY" ? tasks.terminate(run) : flows.terminate(run))
          : false;
      }
      return ok(out);
    },
  );
}

function registerDelete(app: TypedApp, { store, stored }: RunDeps): void {
  app.post(
    "/run/delete",
    {
      config: { access: "contextEnv" },
      schema: { body: RunIdsBody, response: { 200: Envelope(RunIdMap) } },
    },
    async (req) => {
      const deleted = await store.deleteRuns(req.ctx.scope, req.body.runIds);
      // Never refused by LIMIT_STORED_BYTES_PER_APP: it is how an app at it makes room.
      if (deleted.size > 0 && req.ctx.scope) stored?.forget(req.ctx.scope.app);
      return ok(Object.fromEntries(req.body.runIds.map((id) => [id, deleted.has(id)])));
    },
  );
}

/** The element a start or run-sync names, checked: these endpoints run flows only. */
function locatorOf(b: Locator): Locator {
  if (b.elementName === undefined && b.elementId === undefined)
    throw badRequest("body.elementName or body.elementId is required");
  if (b.folderId !== undefined && b.path !== undefined)
    throw badRequest("folderId and path must not both be given");
  // These endpoints run flows; a Python element runs through the script service.
  if (b.elementType !== undefined && b.elementType !== "DPL")
    throw badRequest(
      `body.elementType must be DPL: flows are DPL, a PY element runs through the script service`,
    );
  return {
    elementName: b.elementName,
    elementId: b.elementId,
    elementType: b.elementType,
    folderId: b.folderId,
    path: b.path,
  };
}

/**
 * A request's `parentRunId` names a run of the caller's own app and space (docs/dataflow-service.md,
 * "Runs"): a link to another tenant's run, or to none, would show in monitoring and cascade
 * terminations. An empty string is no parent, as Go clients send an unset string.
 */
async function parentOf(
  store: Store,
  scope: Scope | null,
  parentRunId: string | undefined,
): Promise<string | undefined> {
  if (parentRunId === undefined || parentRunId === "") return undefined;
  const parent = scope ? await store.getRun(scope, parentRunId) : undefined;
  if (!parent)
    throw badRequest(`body.parentRunId "${parentRunId}" names no run of this app and space`);
  return parent.id;
}

export function sendRunResult(reply: FastifyReply, run: Run): FastifyReply {
  const headers = { "x-run-id": run.id };
  if (run.status === "FAILURE")
    throw new SluiceError(
      ErrorCode.RUN_FAILED,
      [run.summary ?? run.error ?? "run failed"],
      headers,
    );
  if (run.status === "CANCELED") throw new SluiceError(ErrorCode.RUN_CANCELED, [run.id], headers);
  // The stored result is JSON text already; splice it in rather than parse and re-serialise.
  return reply.type("application/json").send(okJson(run.result));
}
