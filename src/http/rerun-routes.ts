import type { TypeBoxTypeProvider } from "@fastify/type-provider-typebox";
import type { FastifyInstance, FastifyReply } from "fastify";
import { type Static, Type } from "typebox";
import { ErrorCode, SluiceError } from "../errors.ts";
import { checkStillKept } from "../flows/rerun-kept.ts";
import type { FlowRuns } from "../runs/flow-runs.ts";
import { checkRerunnable } from "../runs/rerun.ts";
import type { TaskService } from "../scripts/task-service.ts";
import type { RerunKind, Run, Scope, Store } from "../store/types.ts";
import { scopeOf } from "./context.ts";
import { AnyEnvelope, ok, okJson } from "./envelope.ts";
import { RunIdParams } from "./flow-schemas.ts";
import { sendRunResult } from "./run-routes.ts";
import { assertSucceeded } from "./script-routes.ts";

export const RerunBody = Type.Object({
  sync: Type.Optional(
    Type.Boolean({ description: "wait for the new run like /run-sync (default false)" }),
  ),
  timeout: Type.Optional(
    Type.Integer({ minimum: 0, description: "seconds, with sync: as /run-sync's timeout" }),
  ),
  inProcess: Type.Optional(Type.Boolean({ description: "async only: as /run's inProcess" })),
});
type RerunOptions = Static<typeof RerunBody>;

interface Deps {
  flows: FlowRuns;
  tasks: TaskService;
  store: Store;
}

/**
 * Endpoints 22–23 (docs/dataflow-service.md, "Re-run and resume"): a new run of a finished run's
 * element, revision and parameter, linked to it; a resume also reuses its succeeded nodes. Another
 * scope's run answers 28020002, as every run lookup does.
 */
export async function rerunRoutes(fastify: FastifyInstance, deps: Deps): Promise<void> {
  const app = fastify.withTypeProvider<TypeBoxTypeProvider>();
  for (const kind of ["rerun", "resume"] as const) {
    app.post(
      `/run/:runId/${kind}`,
      {
        // Every option has a default, so no body at all is `{}` (docs/dataflow-service.md).
        config: { access: "context", bodyOptional: true },
        schema: { params: RunIdParams, body: RerunBody, response: { 200: AnyEnvelope } },
      },
      async (req, reply) => {
        const scope = scopeOf(req);
        const old = await deps.store.getRun(scope, req.params.runId);
        if (!old) throw new SluiceError(ErrorCode.RUN_NOT_FOUND, [req.params.runId]);
        checkRerunnable(old);
        const ctx = { scope, user: req.ctx.user, old, kind, opts: req.body };
        if (old.elementType === "PY") {
          if (kind === "resume")
            throw new SluiceError(ErrorCode.RUN_NOT_RESUMABLE, [
              old.id,
              "only a flow run resumes; re-run a script task",
            ]);
          await checkStillKept(deps.store, old, kind);
          return rerunTask(deps, ctx, reply);
        }
        await checkStillKept(deps.store, old, kind);
        return rerunFlow(deps, ctx, reply);
      },
    );
  }
}

interface Rerun {
  scope: Scope;
  user: string | null;
  old: Run;
  kind: RerunKind;
  opts: RerunOptions;
}

async function rerunFlow(deps: Deps, r: Rerun, reply: FastifyReply) {
  const req = {
    scope: r.scope,
    user: r.user,
    locator: { elementId: r.old.elementId },
    parameter: JSON.parse(r.old.runParam ?? "null") as unknown,
    rerun: { of: r.old, kind: r.kind },
  };
  if (!r.opts.sync) {
    const id = await deps.flows.start({
      ...req,
      inProcess: r.opts.inProcess ?? false,
      trigger: "ASYNC",
    });
    reply.header("x-run-id", id);
    return ok(id);
  }
  const run = await deps.flows.runSync(req, r.opts.timeout);
  reply.header("x-run-id", run.id);
  if (run.status === "QUEUED" || run.status === "STARTED")
    throw new SluiceError(ErrorCode.RUN_WAIT_ELAPSED, [run.id, run.status], { "x-run-id": run.id });
  return sendRunResult(reply, run);
}

async function rerunTask(deps: Deps, r: Rerun, reply: FastifyReply) {
  const req = {
    scope: r.scope,
    user: r.user,
    locator: { elementId: r.old.elementId, elementType: "PY" },
    parameter: JSON.parse(r.old.runParam ?? "null") as unknown,
    taskName: r.old.runName ?? undefined,
    rerunOf: { runId: r.old.id, kind: "rerun" as const },
    // The version the task ran (a task from before script versions: the newest).
    version: r.old.version == null ? undefined : Number(r.old.version),
  };
  if (!r.opts.sync) {
    const id = await deps.tasks.submit({ ...req, trigger: "ASYNC" });
    reply.header("x-run-id", id).header("x-task-id", id);
    return ok(id);
  }
  const { run, killedOnTimeout } = await deps.tasks.runSync(
    { ...req, trigger: "SYNC" },
    { timeoutS: r.opts.timeout },
  );
  reply.header("x-run-id", run.id).header("x-task-id", run.id).header("x-task-status", run.status);
  assertSucceeded(run, killedOnTimeout);
  return reply.type("application/json").send(okJson(run.result));
}
