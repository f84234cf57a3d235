import Fastify, {
  type FastifyBaseLogger,
  type FastifyInstance,
  type FastifyReply,
  type LogLevel,
} from "fastify";
import type { Logger } from "pino";
import { MAX_NAME_BYTES } from "./artifacts/names.ts";
import type { AuditTrail } from "./audit/audit-trail.ts";
import { createByteBudget } from "./byte-budget.ts";
import type { Clock } from "./clock.ts";
import type { Config } from "./config.ts";
import { badRequest, ErrorCode, formatMessage, languageOf } from "./errors.ts";
import type { FlowLifecycle } from "./flows/lifecycle.ts";
import { installAnswerBudget } from "./http/answer-budget.ts";
import { artifactRoutes } from "./http/artifact-routes.ts";
import { auditHook } from "./http/audit-hook.ts";
import { auditRoutes } from "./http/audit-routes.ts";
import { installBodyBudget } from "./http/body-budget.ts";
import { browserGuard } from "./http/browser-guard.ts";
import { bundleRoutes } from "./http/bundle-routes.ts";
import { consoleRoutes } from "./http/console-routes.ts";
import { contextPlugin } from "./http/context.ts";
import { createDownloadBudget } from "./http/download-budget.ts";
import { fail } from "./http/envelope.ts";
import { answerClientError, answerExpectation, installErrorHandler } from "./http/error-handler.ts";
import { flowRoutes } from "./http/flow-routes.ts";
import { installBodyDecoding } from "./http/gzip-body.ts";
import { healthRoutes } from "./http/health-routes.ts";
import { createHeldQuota, type HeldQuota } from "./http/held-quota.ts";
import { createMetrics, type Metrics } from "./http/metrics.ts";
import { monitorRoutes } from "./http/monitor-routes.ts";
import { installNulCheck } from "./http/no-nul.ts";
import { registerOpenApi } from "./http/openapi.ts";
import { opsPlugin } from "./http/ops-routes.ts";
import { progressRoutes } from "./http/progress-routes.ts";
import { installRequestForms } from "./http/request-forms.ts";
import { rerunRoutes } from "./http/rerun-routes.ts";
import { retentionRoutes } from "./http/retention-routes.ts";
import { revisionRoutes, scriptVersionRoutes } from "./http/revision-routes.ts";
import { runRoutes } from "./http/run-routes.ts";
import { scriptRoutes } from "./http/script-routes.ts";
import { secretRoutes } from "./http/secret-routes.ts";
import { uploadRoutes } from "./http/upload-routes.ts";
import { webhookRoutes } from "./http/webhook-routes.ts";
import type { ProgressHub } from "./progress/hub.ts";
import type { FlowRuns } from "./runs/flow-runs.ts";
import type { Idempotency } from "./runs/idempotency.ts";
import type { Retention } from "./runs/retention.ts";
import type { DataDisk } from "./runs/run-disk.ts";
import type { FlowSchedules } from "./scheduler/flow-schedules.ts";
import type { ScriptRunner } from "./scripts/runner-types.ts";
import type { ScriptEnvs } from "./scripts/script-envs.ts";
import type { SyntaxChecker } from "./scripts/syntax-check.ts";
import type { TaskService } from "./scripts/task-service.ts";
import type { Secrets } from "./secrets/secrets.ts";
import type { ArtifactStore } from "./store/kysely-artifacts.ts";
import type { Store } from "./store/types.ts";
import type { StoredQuota } from "./stored-quota.ts";
import type { Topology } from "./topology.ts";
import type { Webhooks } from "./webhooks/index.ts";

export interface AppDeps {
  config: Config;
  store: Store;
  clock: Clock;
  logger: Logger;
  tasks: TaskService;
  runner: ScriptRunner;
  /** The sandboxed syntax check of uploads (the runner's). */
  syntax: SyntaxChecker;
  /** Builds the environments of uploads' declared dependencies (the runner's). */
  envs?: ScriptEnvs | undefined;
  lifecycle: FlowLifecycle;
  flows: FlowRuns;
  /** Secrets of a scope (docs/secrets.md); absent: no secret endpoints. */
  secrets?: Secrets | undefined;
  /** `Idempotency-Key` on the start endpoints (docs/idempotency.md). */
  idempotency: Idempotency;
  /** Cron schedules for GET /monitor/flows; absent: none shown. */
  schedules?: Pick<FlowSchedules, "schedules" | "settled"> | undefined;
  /** From createServices (fed by the run events); a bare one otherwise. */
  metrics?: Metrics;
  /** Where this process stands (services.ts): what /health shows, whether the API is served. */
  topology: Pick<Topology, "mode" | "servesApi">;
  /** Completion webhooks (docs/webhooks.md): deliveries in the run detail, the signing secret. */
  webhooks?: Pick<Webhooks, "deliveriesOf" | "secret" | "rotateSecret"> | undefined;
  /** The data directory's free space, for /health (docs/security.md, "Disk"); absent: not shown. */
  disk?: Pick<DataDisk, "state"> | undefined;
  /** The audit trail (docs/audit.md); absent: nothing is recorded, no /audit endpoint. */
  audit?: Pick<AuditTrail, "record" | "list"> | undefined;
  /** Files runs kept (docs/artifacts.md); absent: no artifact endpoints. */
  artifacts?: { store: ArtifactStore } | undefined;
  /** Run retention (docs/retention.md): its dry run; absent: no endpoint. */
  retention?: Pick<Retention, "preview"> | undefined;
  /** Live progress of runs (docs/live-progress.md); absent: no progress endpoints. */
  progress?: ProgressHub | undefined;
  /** LIMIT_STORED_BYTES_PER_APP (docs/security.md, "What an app may store"); absent: no bound. */
  stored?: StoredQuota | undefined;
}

/** A path parameter's longest URL-encoded form: an artifact name of MAX_NAME_BYTES bytes. */
const MAX_PARAM_LENGTH = 3 * MAX_NAME_BYTES;

/** The whole HTTP application. It never listens: main.ts and the tests decide that. */
export async function buildApp(deps: AppDeps): Promise<FastifyInstance> {
  const { config } = deps;
  const app = Fastify({
    loggerInstance: deps.logger as FastifyBaseLogger,
    bodyLimit: config.limits.bodyBytes,
    genReqId: (req) => {
      const given = req.headers["x-request-id"];
      return typeof given === "string" && given.length <= 128 ? given : crypto.randomUUID();
    },
    ajv: {
      customOptions: {
        // No coercion: a JSON value of the wrong type is a 400 naming the field; query strings
        // and text booleans are read in one place before validation (docs/errors.md).
        coerceTypes: false,
        useDefaults: true,
        removeAdditional: false,
        allErrors: false,
        // Errors carry their schema, so a range error names both bounds (error-handler.ts).
        verbose: true,
      },
    },
    // An artifact name is one URL-encoded path parameter (docs/artifacts.md): any name within
    // its limit, at three characters a byte encoded, must reach the route (the default is 100).
    routerOptions: { ignoreTrailingSlash: true, maxParamLength: MAX_PARAM_LENGTH },
    clientErrorHandler: answerClientError,
    // Node answers an HTTP/1.1 request without Host with a bare 400; the hook below names it.
    http: { requireHostHeader: false },
    // Errors raised before routing (bad URL encoding, bad content-type header) still get an envelope.
    frameworkErrors: (err, req, reply) => {
      const language = languageOf(req.headers.language);
      // Neither says which parameter; neither repeats the URL, which may be 16 KB long.
      const text =
        err.code === "FST_ERR_BAD_URL"
          ? "malformed URL encoding"
          : err.code === "FST_ERR_MAX_PARAM_LENGTH"
            ? `params: a path parameter is longer than ${MAX_PARAM_LENGTH} characters (URL-encoded)`
            : err.message;
      void (reply as FastifyReply)
        .code(200)
        .send(fail(ErrorCode.BAD_REQUEST, formatMessage(ErrorCode.BAD_REQUEST, [text], language)));
    },
  });

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
  // Before the context: a cross-site request with the session cookie is refused unread.
  await app.register(browserGuard);
  await app.register(contextPlugin, { config, nowS: () => Math.floor(deps.clock.now() / 1000) });
  const metrics = deps.metrics ?? createMetrics();
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
  // Before every route: swagger collects routes as they register; ops hooks must see them all.
  await registerOpenApi(app, config);
  // Event streams and long polls of both groups (docs/live-progress.md#bounds).
  const held = createHeldQuota(config.limits);
  metrics.watchHeld(held);
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
  // A worker process answers only the root endpoints (health for orchestration).
  if (!deps.topology.servesApi) return app;
  await registerServiceRoutes(app, deps, held, metrics);
  await app.register(consoleRoutes, { store: deps.store, dataflowPrefix: config.dataflowPrefix });
  return app;
}

/** The data-flow and script endpoint groups, each under its prefix. */
async function registerServiceRoutes(
  app: FastifyInstance,
  deps: AppDeps,
  quota: HeldQuota,
  metrics: Metrics,
): Promise<void> {
  const { config } = deps;
  const downloads = createDownloadBudget(config.artifacts);
  metrics.watchBudget("download", downloads);
  await app.register(
    async (dataflow) => {
      await dataflow.register(runRoutes, {
        flows: deps.flows,
        tasks: deps.tasks,
        store: deps.store,
        idempotency: deps.idempotency,
        held: quota,
        stored: deps.stored,
      });
      await dataflow.register(rerunRoutes, {
        flows: deps.flows,
        tasks: deps.tasks,
        store: deps.store,
      });
      await dataflow.register(flowRoutes, { lifecycle: deps.lifecycle });
      await dataflow.register(bundleRoutes, {
        store: deps.store,
        clock: deps.clock,
        lifecycle: deps.lifecycle,
        config,
        syntax: deps.syntax,
        stored: deps.stored,
      });
      await dataflow.register(revisionRoutes, { store: deps.store });
      if (deps.secrets) await dataflow.register(secretRoutes, { secrets: deps.secrets });
      await dataflow.register(monitorRoutes, {
        store: deps.store,
        schedules: deps.schedules && ((id: string) => deps.schedules?.schedules(id) ?? []),
        schedulesSettled: deps.schedules && (() => deps.schedules?.settled() ?? Promise.resolve()),
        deliveries: deps.webhooks && ((runId: string) => deps.webhooks?.deliveriesOf(runId) ?? []),
      });
      if (deps.webhooks) await dataflow.register(webhookRoutes, { webhooks: deps.webhooks });
      if (deps.audit) await dataflow.register(auditRoutes, { audit: deps.audit });
      if (deps.artifacts)
        await dataflow.register(artifactRoutes, {
          store: deps.store,
          artifacts: deps.artifacts.store,
          budget: downloads,
        });
      if (deps.retention)
        await dataflow.register(retentionRoutes, {
          retention: deps.retention,
          globalDays: config.retention.days,
        });
      if (deps.progress) await dataflow.register(progressRoutes, progressOpts(deps, quota, "flow"));
    },
    { prefix: config.dataflowPrefix },
  );
  await app.register(
    async (script) => {
      await script.register(scriptRoutes, {
        config,
        tasks: deps.tasks,
        idempotency: deps.idempotency,
        held: quota,
      });
      await script.register(scriptVersionRoutes, { store: deps.store });
      if (deps.progress) await script.register(progressRoutes, progressOpts(deps, quota, "script"));
      await script.register(uploadRoutes, {
        config,
        store: deps.store,
        clock: deps.clock,
        syntax: deps.syntax,
        envs: deps.envs,
        disk: deps.disk,
        stored: deps.stored,
      });
    },
    { prefix: config.scriptPrefix },
  );
}

/** An idle event stream gets a comment line this often (proxies close silent connections). */
const SSE_HEARTBEAT_MS = 15_000;

function progressOpts(deps: AppDeps, quota: HeldQuota, group: "flow" | "script") {
  const hub = deps.progress as ProgressHub;
  return { store: deps.store, hub, clock: deps.clock, heartbeatMs: SSE_HEARTBEAT_MS, quota, group };
}
