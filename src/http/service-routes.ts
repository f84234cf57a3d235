import type { FastifyInstance } from "fastify";
import type { AppDeps } from "../app-deps.ts";
import type { ProgressHub } from "../progress/hub.ts";
import { artifactRoutes } from "./artifact-routes.ts";
import { auditRoutes } from "./audit-routes.ts";
import { bundleRoutes } from "./bundle-routes.ts";
import { createDownloadBudget } from "./download-budget.ts";
import { flowRoutes } from "./flow-routes.ts";
import type { HeldQuota } from "./held-quota.ts";
import type { Metrics } from "./metrics.ts";
import { monitorRoutes } from "./monitor-routes.ts";
import { progressRoutes } from "./progress-routes.ts";
import { rerunRoutes } from "./rerun-routes.ts";
import { retentionRoutes } from "./retention-routes.ts";
import { revisionRoutes, scriptVersionRoutes } from "./revision-routes.ts";
import { runRoutes } from "./run-routes.ts";
import { scriptRoutes } from "./script-routes.ts";
import { secretRoutes } from "./secret-routes.ts";
import { uploadRoutes } from "./upload-routes.ts";
import { webhookRoutes } from "./webhook-routes.ts";

/** The data-flow and script endpoint groups, each under its prefix. */
export async function registerServiceRoutes(
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
