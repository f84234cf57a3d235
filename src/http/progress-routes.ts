import type { TypeBoxTypeProvider } from "@fastify/type-provider-typebox";
import type { FastifyInstance, FastifyReply } from "fastify";
import { type Static, Type } from "typebox";
import type { Clock } from "../clock.ts";
import { ErrorCode, SluiceError } from "../errors.ts";
import type { ProgressHub } from "../progress/hub.ts";
import type { NodeState, ProgressEvent } from "../progress/types.ts";
import { TERMINAL } from "../store/model.ts";
import type { Run, ScopeFilter, Store } from "../store/types.ts";
import { Envelope, ok } from "./envelope.ts";
import type { HeldQuota } from "./held-quota.ts";
import { openSse, SSE_HEADERS, type SseStream } from "./sse.ts";

export interface ProgressRouteOptions {
  store: Store;
  hub: ProgressHub;
  clock: Clock;
  /** How often an idle event stream gets a comment line. */
  heartbeatMs: number;
  /** Open streams per tenant and waiting requests per app and node, shared by both groups. */
  quota: HeldQuota;
  /** `flow`: the data-flow group (flow runs and tasks); `script`: script tasks only. */
  group: "flow" | "script";
}

const RunParams = Type.Object({ runId: Type.String({ minLength: 1 }) });
const TaskParams = Type.Object({ taskId: Type.String({ minLength: 1 }) });
const AfterQuery = Type.Object({
  after: Type.Optional(
    Type.Integer({ minimum: 0, description: "answer the events numbered after this one" }),
  ),
});

const NodeStateSchema = Type.Object({
  nodeId: Type.String(),
  nodeType: Type.String(),
  status: Type.String({ description: "RUNNING, SUCCESS, FAILURE, SKIPPED or CANCELED" }),
  startTime: Type.Optional(Type.Integer()),
  endTime: Type.Optional(Type.Integer()),
  attempts: Type.Optional(Type.Integer()),
  error: Type.Optional(Type.String()),
});

export const ProgressPage = Type.Object({
  runStatus: Type.String(),
  ended: Type.Boolean(),
  seq: Type.Integer({ description: "the last event number this answer includes" }),
  nodes: Type.Array(NodeStateSchema),
  events: Type.Array(
    Type.Object(
      {
        kind: Type.String({ description: "node, output or gap" }),
        seq: Type.Integer(),
      },
      { additionalProperties: true },
    ),
  ),
});

/**
 * Live progress of one run (docs/live-progress.md): an event stream, and a polling fallback. Scoped
 * like the run: another scope's run answers as one that does not exist.
 */
export async function progressRoutes(
  fastify: FastifyInstance,
  opts: ProgressRouteOptions,
): Promise<void> {
  const app = fastify.withTypeProvider<TypeBoxTypeProvider>();
  const flow = opts.group === "flow";
  // Open streams end when the app closes: a watcher must not hold a shutdown up.
  const open = new Set<SseStream>();
  fastify.addHook("preClose", async () => {
    for (const s of open) s.end();
  });
  const find = async (scope: ScopeFilter, id: string): Promise<Run> => {
    const run = await opts.store.getRun(scope, id);
    if (run && (flow || run.elementType === "PY")) return run;
    throw new SluiceError(flow ? ErrorCode.RUN_NOT_FOUND : ErrorCode.TASK_NOT_FOUND, [id]);
  };
  const access = flow ? "contextEnv" : "lookup";
  const pollSchema = {
    querystring: AfterQuery,
    response: { 200: Envelope(ProgressPage) },
  };
  const events = async (scope: ScopeFilter, id: string, reply: FastifyReply) => {
    const run = await find(scope, id);
    // A HEAD asks for the headers only: no stream is opened, held or counted, and the
    // connection is free for the client's next request (docs/live-progress.md).
    if (reply.request.method === "HEAD") {
      reply.hijack();
      reply.raw.writeHead(200, SSE_HEADERS).end();
      return;
    }
    const free = opts.quota.take(scope, "stream");
    try {
      await stream(opts, run, () => find(scope, id), reply, open, free);
    } catch (err) {
      free();
      // Once the stream has begun no envelope can follow: the connection is ended instead, so
      // nothing uncounted stays open.
      if (reply.raw.headersSent) reply.raw.destroy();
      throw err;
    }
  };
  if (flow) {
    app.get(
      "/run/:runId/events",
      { config: { access }, schema: { params: RunParams } },
      (req, reply) => events(req.ctx.scope, req.params.runId, reply),
    );
    app.get(
      "/run/:runId/progress",
      { config: { access }, schema: { params: RunParams, ...pollSchema } },
      async (req) => ok(page(opts, await find(req.ctx.scope, req.params.runId), req.query.after)),
    );
  } else {
    app.get(
      "/script/events/:taskId",
      { config: { access }, schema: { params: TaskParams } },
      (req, reply) => events(req.ctx.scope, req.params.taskId, reply),
    );
    app.get(
      "/script/progress/:taskId",
      { config: { access }, schema: { params: TaskParams, ...pollSchema } },
      async (req) => ok(page(opts, await find(req.ctx.scope, req.params.taskId), req.query.after)),
    );
  }
}

/** A finished run's nodes, from its record (the executor's node logs). */
function recordedNodes(run: Run): NodeState[] {
  const nodes = run.detail?.nodes;
  if (!Array.isArray(nodes)) return [];
  return (nodes as NodeState[]).map(
    ({ nodeId, nodeType, status, startTime, endTime, attempts, error }) =>
      strip({ nodeId, nodeType, status, startTime, endTime, attempts, error }),
  );
}

function strip<T extends object>(o: T): T {
  return Object.fromEntries(Object.entries(o).filter(([, v]) => v !== undefined)) as T;
}

function page(opts: ProgressRouteOptions, run: Run, after = 0): Static<typeof ProgressPage> {
  const ended = TERMINAL.has(run.status);
  // A run that ended with no live state here has nothing more to say live: the record answers,
  // and no state (nor, in a cluster, a want to the other nodes) is made for it.
  const live =
    ended && !opts.hub.snapshot(run.id)
      ? { snapshot: { seq: 0, nodes: [] }, events: [] }
      : opts.hub.poll(run.id, after);
  return {
    runStatus: run.status,
    ended,
    seq: Math.max(after, live.events.at(-1)?.seq ?? 0),
    nodes: ended ? recordedNodes(run) : live.snapshot.nodes.map(strip),
    events: live.events.map(strip),
  };
}

/** Current state, kept events, live events, then `end` with the recorded status; then closes. */
async function stream(
  opts: ProgressRouteOptions,
  run: Run,
  read: () => Promise<Run>,
  reply: FastifyReply,
  open: Set<SseStream>,
  free: () => void,
): Promise<void> {
  reply.hijack();
  let stop = () => {};
  const sse = openSse(reply.raw, {
    clock: opts.clock,
    heartbeatMs: opts.heartbeatMs,
    onClose: () => {
      open.delete(sse);
      free();
      stop();
    },
  });
  open.add(sse);
  const finish = async () => {
    stop();
    if (sse.closed) return;
    try {
      const done = await read();
      sse.send({ event: "end", data: endOf(done) });
    } catch {
      sse.send({ event: "end", data: { runStatus: "DELETED" } });
    }
    sse.end();
  };
  if (TERMINAL.has(run.status)) {
    sse.send({
      event: "state",
      data: { runStatus: run.status, seq: 0, nodes: recordedNodes(run) },
    });
    sse.send({ event: "end", data: endOf(run) });
    sse.end();
    return;
  }
  const send = (e: ProgressEvent) => sse.send({ event: e.kind, data: strip(e), id: e.seq });
  let ended = false;
  const w = opts.hub.watch(run.id, {
    event: send,
    ended: () => {
      if (ended) return;
      ended = true;
      void finish();
    },
  });
  stop = w.stop;
  if (sse.closed) return stop();
  const nodes = w.snapshot.nodes.map(strip);
  sse.send({
    event: "state",
    data: { runStatus: run.status, seq: w.snapshot.seq, nodes },
    id: w.snapshot.seq,
  });
  for (const e of w.events) send(e);
  // It may have ended between the first read and the watch: the store says.
  const now = await read().catch(() => undefined);
  if (!ended && (!now || TERMINAL.has(now.status))) {
    ended = true;
    await finish();
  }
}

function endOf(run: Run) {
  return strip({
    runStatus: run.status,
    summary: run.summary ?? undefined,
    endTime: run.endTime ?? undefined,
  });
}
