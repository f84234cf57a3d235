import type { FastifyInstance, LogLevel } from "fastify";
import fp from "fastify-plugin";
import { Type } from "typebox";
import type { ScriptRunner } from "../scripts/runner-types.ts";
import type { Store } from "../store/types.ts";
import type { Metrics } from "./metrics.ts";

declare module "fastify" {
  interface FastifyInstance {
    /** Set by graceful shutdown: /ready answers 503 so balancers stop sending work. */
    draining: boolean;
  }
}

export interface OpsOptions {
  /** Level of /ready's and /metrics' request log (docs/operations.md, "Request IDs"). */
  probeLogLevel: LogLevel;
  metrics: Metrics;
  store: Store;
  runner: ScriptRunner;
}

const Check = Type.Object({
  status: Type.String(),
  checks: Type.Record(Type.String(), Type.String()),
});

/**
 * Root operations endpoints and the hooks every request goes through: the request ID echoed as
 * `x-request-id` (the same ID pino puts on every log line of the request) and HTTP latency.
 * Wrapped with fastify-plugin so the hooks apply to every route registered after it.
 */
export const opsPlugin = fp(
  async (app: FastifyInstance, opts: OpsOptions) => {
    app.decorate("draining", false);
    app.addHook("onRequest", async (req, reply) => {
      reply.header("x-request-id", req.id);
    });
    app.addHook("onResponse", async (req, reply) => {
      const route = req.routeOptions.url ?? "unmatched";
      opts.metrics.httpDuration.observe(
        { method: req.method, route, status: String(reply.statusCode) },
        reply.elapsedTime / 1000,
      );
    });

    app.get(
      "/ready",
      { logLevel: opts.probeLogLevel, schema: { response: { 200: Check, 503: Check } } },
      async (_req, reply) => {
        const checks: Record<string, string> = {};
        if (app.draining) checks.shutdown = "draining";
        try {
          // A primary-key read of an ID that cannot exist: proves the store answers, costs nothing.
          await opts.store.getRun(null, "ready-probe");
          checks.store = "ok";
        } catch (err) {
          checks.store = `unreachable: ${err instanceof Error ? err.message : String(err)}`;
        }
        try {
          const s = opts.runner.stats();
          checks.runner = `ok (${s.running} running, ${s.idle} idle, ${s.queued} waiting)`;
        } catch (err) {
          checks.runner = `down: ${err instanceof Error ? err.message : String(err)}`;
        }
        const ready =
          !app.draining && checks.store === "ok" && checks.runner?.startsWith("ok") === true;
        return reply
          .code(ready ? 200 : 503)
          .send({ status: ready ? "ready" : "not ready", checks });
      },
    );

    app.get(
      "/metrics",
      {
        logLevel: opts.probeLogLevel,
        schema: {
          produces: ["text/plain"],
          response: { 200: Type.String({ description: "Prometheus text exposition format" }) },
        },
      },
      async (_req, reply) => {
        const body = await opts.metrics.registry.metrics();
        return reply.type(opts.metrics.registry.contentType).send(body);
      },
    );
  },
  { name: "sluice-ops" },
);
