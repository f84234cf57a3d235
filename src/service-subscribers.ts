import type { Config } from "./config.ts";
import { createMetrics, type Metrics } from "./http/metrics.ts";
import { createProgressHub, type ProgressHub } from "./progress/hub.ts";
import { type PgProgressRelay, startPgProgressRelay } from "./progress/pg-relay.ts";
import {
  createErrorHandlers,
  type ErrorHandlerConfig,
  type ErrorHandlers,
} from "./runs/error-handlers/index.ts";
import { createOwedSweep, type OwedSweep } from "./runs/error-handlers/recover.ts";
import type { FlowRuns } from "./runs/flow-runs.ts";
import type { ScriptRunner } from "./scripts/runner-types.ts";
import type { TaskService } from "./scripts/task-service.ts";
import type { ServiceBase } from "./service-base.ts";
import { createNoticeStore } from "./store/kysely-notices.ts";
import { createWebhookStore } from "./store/kysely-webhooks.ts";
import { createWebhooks, type Webhooks, type WebhooksConfig } from "./webhooks/index.ts";

/*
 * The subscribers src/services.ts wires to runs (docs/architecture.md, "Where each piece lives"):
 * what watches runs as they go, and what follows a run's end. Still wiring, as service-parts.ts.
 */

/** Metrics and live progress, relayed from other nodes when the database is shared. */
export async function observeRuns(
  deps: Omit<ServiceBase, "nodeId"> & { runner: ScriptRunner },
): Promise<{ metrics: Metrics; progress: ProgressHub; relay: PgProgressRelay | undefined }> {
  const { config, topology, events, runner, clock, logger } = deps;
  const metrics = createMetrics();
  metrics.observe(events, topology.store);
  const progress = createProgressHub({ clock, events });
  // Progress of a run executing on another node reaches this one only with a shared database.
  const relay =
    topology.bridge && config.databaseUrl
      ? await startPgProgressRelay({
          connectionString: config.databaseUrl,
          hub: progress,
          logger,
          clock,
        })
      : undefined;
  metrics.watch(topology.queue, runner);
  return { metrics, progress, relay };
}

/** What follows a run's end: error handlers, what a dead process owed of them, webhooks. */
export function followRuns(deps: ServiceBase & { flows: FlowRuns; tasks: TaskService }): {
  errorHandlers: ErrorHandlers;
  owed: OwedSweep;
  webhooks: Webhooks;
} {
  const { config, topology, events, clock, logger, nodeId } = deps;
  const { store } = topology;
  const notices = createNoticeStore(store.db, store.dialect);
  const errorHandlers = createErrorHandlers({
    store,
    notices,
    flows: deps.flows,
    tasks: deps.tasks,
    events,
    clock,
    logger,
    config: errorHandlerConfig(config),
  });
  // What a dead process owed (docs/error-handlers.md, "Durable"): every other holder's when this
  // process owns the database (at start), else those of nodes that stopped beating (and on a timer).
  const owed = createOwedSweep({
    notices,
    handlers: errorHandlers,
    clock,
    logger,
    nodeId,
    config: {
      takeAll: topology.ownsDatabase,
      heartbeatTimeoutMs: config.heartbeatTimeoutMs,
      windowMs: config.flowConfig.handlerRecoverMs,
      // Owning the database, no other holder appears after the start: the timer's passes look
      // only at this node's own marks it gave up, and cost nothing while there are none
      // (a backlog of more than a batch is still taken, pass after pass, recover.ts).
      everyMs: config.heartbeatMs,
    },
  });
  const webhooks = createWebhooks({
    store,
    outbox: createWebhookStore(store.db, store.dialect),
    events,
    clock,
    nodeId,
    logger,
    config: webhooksConfig(config),
    ownsDatabase: topology.ownsDatabase,
  });
  return { errorHandlers, owed, webhooks };
}

export function errorHandlerConfig(config: Config): ErrorHandlerConfig {
  const fc = config.flowConfig;
  return {
    smtpUrl: config.smtpUrl,
    smtpFrom: fc.smtpFrom,
    language: fc.notifyLanguage,
    allowPrivateWebhooks: fc.allowPrivateWebhooks,
    attempts: fc.handlerAttempts,
    backoffMs: fc.handlerBackoffMs,
    webhookTimeoutMs: fc.webhookTimeoutMs,
    customWaitS: fc.customHandlerWaitS,
    concurrency: fc.handlerConcurrency,
  };
}

export function webhooksConfig(config: Config): WebhooksConfig {
  return {
    ...config.webhooks,
    timeoutMs: config.flowConfig.webhookTimeoutMs,
    allowPrivate: config.flowConfig.allowPrivateWebhooks,
    dataflowPrefix: config.dataflowPrefix,
    scriptPrefix: config.scriptPrefix,
  };
}
