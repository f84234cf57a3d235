import type { FastifyInstance, LogLevel } from "fastify";
import type { AppDeps } from "./app-deps.ts";
import { createByteBudget } from "./byte-budget.ts";
import { badRequest } from "./errors.ts";
import { installAnswerBudget } from "./http/answer-budget.ts";
import { auditHook } from "./http/audit-hook.ts";
import { installBodyBudget } from "./http/body-budget.ts";
import { browserGuard } from "./http/browser-guard.ts";
import { consoleRoutes } from "./http/console-routes.ts";
import { contextPlugin } from "./http/context.ts";
import { answerExpectation, installErrorHandler } from "./http/error-handler.ts";
import { createFastify } from "./http/fastify-app.ts";
import { installBodyDecoding } from "./http/gzip-body.ts";
import { healthRoutes } from "./http/health-routes.ts";
import { createHeldQuota } from "./http/held-quota.ts";
import { createMetrics, type Metrics } from "./http/metrics.ts";
import { installNulCheck } from "./http/no-nul.ts";
import { registerOpenApi } from "./http/openapi.ts";
import { opsPlugin } from "./http/ops-routes.ts";
import { installRequestForms } from "./http/request-forms.ts";
import { registerServiceRoutes } from "./http/service-routes.ts";

export type { AppDeps } from "./app-deps.ts";

/**
 * The whole HTTP application. It never listens: main.ts and the tests decide that. Each step
 * below depends on the ones before it (the order of hooks is the order they run in).
 */
export async function buildApp(deps: AppDeps): Promise<FastifyInstance> {
  const { config } = deps;
  const app = createFastify(deps);
  installRequestChecks(app, deps);
  const metrics = deps.metrics ?? createMetrics();
  await installTenantGuards(app, deps, metrics);
  // Before every route: swagger collects routes as they register; ops hooks must see them all.
  await registerOpenApi(app, config);
  // Event streams and long polls of both groups (docs/live-progress.md#bounds).
  const held = createHeldQuota(config.limits);
  metrics.watchHeld(held);
  await registerProbes(app, deps, metrics);
  // A worker process answers only the root endpoints (health for orchestration).
  if (!deps.topology.servesApi) return app;
  await registerServiceRoutes(app, deps, held, metrics);
  await app.register(consoleRoutes, { store: deps.store, dataflowPrefix: config.dataflowPrefix });
  return app;
}

/** The request's own form: `Expect`, errors as envelopes, body encodings, NUL, forms, `Host`. */
function installRequestChecks(app: FastifyInstance, deps: AppDeps): void {
  const { config } = deps;
  app.server.on("checkExpectation", answerExpectation);
  installErrorHandler(app, {
    clock: deps.clock,
    discard: { maxBytes: config.limits.discardBytes, idleMs: config.limits.discardIdleMs },
  });
  installBodyDecoding(app);
  installNulCheck(app);
  installRequestForms(app);
  app.addHook("onRequest", async (req) => {
    if (req.raw.httpVersion === "1.1" && !req.headers.host)
      throw badRequest("the Host header is required in HTTP/1.1");
  });
}

/**
 * Who is asking and what they may hold: the browser guard, the caller's scope, the bytes of
 * request bodies and unread answers per app and per node, and the audit trail between them.
 */
async function installTenantGuards(
  app: FastifyInstance,
  deps: AppDeps,
  metrics: Metrics,
): Promise<void> {
  const { config } = deps;
  // Before the context: a cross-site request with the session cookie is refused unread.
  await app.register(browserGuard);
  await app.register(contextPlugin, { config, nowS: () => Math.floor(deps.clock.now() / 1000) });
  // After the context, which names the app a body is counted against.
  const bodies = createByteBudget({
    total: config.limits.bodyBytesInFlight,
    perApp: config.limits.bodyBytesInFlightPerApp,
    what: "request bodies",
    totalSetting: "LIMIT_BODY_BYTES_IN_FLIGHT",
    perAppSetting: "LIMIT_BODY_BYTES_IN_FLIGHT_PER_APP",
  });
  metrics.watchBudget("body", bodies);
  installBodyBudget(app, bodies, config.limits.bodyBytes);
  // Before every route, so that every change is recorded in this one place.
  if (deps.audit && deps.topology.servesApi) {
    await app.register(auditHook, {
      audit: deps.audit,
      config,
      clock: deps.clock,
      schedules: deps.schedules && { store: deps.store, schedules: deps.schedules },
    });
  }
  // After the audit trail's onSend: a change whose answer is refused is recorded as it happened.
  const answers = createByteBudget({
    total: config.limits.answerBytesInFlight,
    perApp: config.limits.answerBytesInFlightPerApp,
    what: "answers not yet read",
    totalSetting: "LIMIT_ANSWER_BYTES_IN_FLIGHT",
    perAppSetting: "LIMIT_ANSWER_BYTES_IN_FLIGHT_PER_APP",
  });
  metrics.watchBudget("answer", answers);
  installAnswerBudget(app, answers);
}

/**
 * The root operations endpoints (`/health`, `/ready`, `/metrics`), answered by every process,
 * workers too, and the request ID and latency hooks every later route goes through.
 */
async function registerProbes(
  app: FastifyInstance,
  deps: AppDeps,
  metrics: Metrics,
): Promise<void> {
  // Probes come every few seconds from balancers and Prometheus: at info their request lines
  // would be most of the log, so they log from warn up (docs/operations.md, "Request IDs").
  const probeLogLevel = (deps.logger.level === "info" ? "warn" : deps.logger.level) as LogLevel;
  await app.register(opsPlugin, {
    probeLogLevel,
    metrics,
    store: deps.store,
    runner: deps.runner,
  });
  await app.register(healthRoutes, {
    probeLogLevel,
    sandbox: deps.runner.sandbox,
    cgroup: deps.runner.cgroup,
    refusal: deps.runner.refusal,
    mode: deps.topology.mode,
    disk: deps.disk,
  });
}
