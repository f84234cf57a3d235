import type { TypeBoxTypeProvider } from "@fastify/type-provider-typebox";
import type { FastifyInstance } from "fastify";
import { type Static, Type } from "typebox";
import { ErrorCode, languageHeader, SluiceError } from "../errors.ts";
import { normalizeConfigure } from "../flows/graph.ts";
import { taskEnvironment, versionEnvironment } from "../monitor/environment.ts";
import { runDisplay } from "../monitor/present.ts";
import { checkResumable } from "../runs/rerun.ts";
import { recordedTraceback } from "../scripts/traceback.ts";
import type { Run, Store } from "../store/types.ts";
import { Envelope, ok } from "./envelope.ts";
import { RunEnvironmentSchema } from "./environment-schema.ts";
import { FilesRemovedSchema, RunDisplayResp } from "./monitor-schemas.ts";
import { TracebackSchema } from "./traceback-schema.ts";

const Opt = Type.Optional;

const NodeLog = Type.Object({
  nodeId: Type.String(),
  nodeType: Type.String(),
  status: Type.String({ description: "SUCCESS, FAILURE, SKIPPED or CANCELED" }),
  startTime: Opt(Type.Integer()),
  endTime: Opt(Type.Integer()),
  attempts: Opt(Type.Integer()),
  error: Opt(Type.String()),
  input: Opt(Type.Unknown({ description: "kept with logContent DETAILED" })),
  output: Opt(Type.Unknown({ description: "kept with logContent DETAILED" })),
  stdout: Opt(Type.String()),
  stderr: Opt(Type.String()),
  reusedFrom: Opt(Type.String({ description: "a resume: the run whose output this node reused" })),
  omitted: Opt(
    Type.Array(
      Type.Union([
        Type.Literal("input"),
        Type.Literal("output"),
        Type.Literal("stdout"),
        Type.Literal("stderr"),
      ]),
      {
        description: "values too large to keep (LIMIT_NODE_LOG_BYTES, docs/flow-graph.md)",
      },
    ),
  ),
  traceback: Opt(TracebackSchema),
});

export const RunDetail = Type.Object({
  run: RunDisplayResp,
  elementType: Type.String(),
  parentRunId: Opt(Type.String()),
  error: Opt(Type.String()),
  failedNodeId: Opt(Type.String()),
  nodes: Type.Array(NodeLog, { description: "flow runs: one entry per node once the run ended" }),
  graph: Opt(
    Type.Object(
      { vertexes: Type.Array(Type.Unknown()), edges: Type.Array(Type.Unknown()) },
      { description: "the flow revision the run used" },
    ),
  ),
  scripts: Opt(
    Type.Array(
      Type.Object({
        nodeId: Type.String(),
        elementId: Type.String(),
        elementName: Type.String(),
        path: Type.String(),
        version: Type.Integer(),
        sha256: Type.String(),
        pinned: Type.Boolean({ description: "false: the revision pinned nothing for the node" }),
        environment: RunEnvironmentSchema,
      }),
      { description: "flow runs: the script versions its script nodes ran" },
    ),
  ),
  stdout: Opt(Type.String({ description: "script tasks" })),
  stderr: Opt(Type.String({ description: "script tasks" })),
  result: Opt(Type.Unknown()),
  traceback: Opt(TracebackSchema),
  environment: Opt(RunEnvironmentSchema),
  filesRemoved: Opt(FilesRemovedSchema),
  resumable: Type.Boolean({
    description: "a FAILURE flow run whose node outputs were kept (logContent DETAILED)",
  }),
});

/**
 * `GET {dataflow}/monitor/run-detail`: what the console's run page and `sluice logs` show beyond
 * RunDisplayResp: each node's status, times, input, output and logs (from the run's stored
 * detail), the graph of the revision it ran, and a script task's stdout/stderr. Same access and
 * scope rules as GET /monitor/run; kept apart so the interface's RunDisplayResp stays as specified.
 */
export async function consoleApi(
  fastify: FastifyInstance,
  opts: { store: Store; dataflowPrefix: string },
): Promise<void> {
  const app = fastify.withTypeProvider<TypeBoxTypeProvider>();
  const { store } = opts;
  app.get(
    `${opts.dataflowPrefix}/monitor/run-detail`,
    {
      config: { access: "contextEnv" },
      schema: {
        querystring: Type.Object({ runId: Type.String({ minLength: 1 }) }),
        response: { 200: Envelope(RunDetail) },
      },
    },
    async (req, reply) => {
      const run = await store.getRun(req.ctx.scope, req.query.runId);
      if (!run) throw new SluiceError(ErrorCode.RUN_NOT_FOUND, [req.query.runId]);
      reply.header("x-run-id", run.id);
      const element = await store.elementById(run.scope, run.elementId);
      const language = languageHeader(req.headers.language);
      const detail = run.detail ?? {};
      // detail.nodes is the executor's NodeLog[] as stored (src/flows/executor.ts).
      const nodes = (Array.isArray(detail.nodes) ? detail.nodes : []) as Static<typeof NodeLog>[];
      const out: Static<typeof RunDetail> = {
        run: runDisplay(run, element, language),
        elementType: run.elementType,
        nodes,
        resumable: false,
      };
      if (run.parentRunId) out.parentRunId = run.parentRunId;
      if (run.filesRemoved) out.filesRemoved = run.filesRemoved;
      if (run.error) out.error = run.error;
      const traceback = recordedTraceback(run.detail);
      if (traceback) out.traceback = traceback;
      if (typeof detail.failedNodeId === "string") out.failedNodeId = detail.failedNodeId;
      // detail.scripts is the ScriptUse[] the run recorded (src/runs/script-node.ts).
      if (Array.isArray(detail.scripts))
        out.scripts = await withEnvironments(store, detail.scripts);
      if (run.elementType === "PY") {
        out.stdout = run.stdout ?? "";
        out.stderr = run.stderr ?? "";
        out.environment = (await taskEnvironment(store, run)) ?? null;
      } else if (run.version) {
        const rev = await store.flowRevision(run.elementId, Number(run.version));
        const g = rev?.flow as { vertexes?: unknown[]; edges?: unknown[] } | undefined;
        if (g) out.graph = { vertexes: g.vertexes ?? [], edges: g.edges ?? [] };
        out.resumable = rev !== undefined && resumable(run, rev.configure);
      }
      if (run.status === "SUCCESS" && run.result != null && run.result.length <= 1_000_000)
        out.result = JSON.parse(run.result);
      return ok(out);
    },
  );
}

type ScriptUseOut = NonNullable<Static<typeof RunDetail>["scripts"]>[number];

/** Each script version a flow run's nodes ran, with the environment that version ran in. */
function withEnvironments(store: Store, scripts: unknown[]): Promise<ScriptUseOut[]> {
  const uses = scripts as Omit<ScriptUseOut, "environment">[];
  return Promise.all(
    uses.map(async (u) => ({
      ...u,
      environment: await versionEnvironment(store, u.elementId, u.version),
    })),
  );
}

/** Whether POST /run/{runId}/resume would accept the run (the console shows its button then). */
function resumable(run: Run, configure: unknown): boolean {
  try {
    checkResumable(run, normalizeConfigure(configure));
    return true;
  } catch {
    return false;
  }
}
