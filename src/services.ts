import { randomBytes } from "node:crypto";
import { hostname } from "node:os";
import type { Logger } from "pino";
import { type ArtifactKeeper, createArtifactKeeper } from "./artifacts/keeper.ts";
import { createAuditStore } from "./audit/audit-store.ts";
import { type AuditTrail, createAuditTrail } from "./audit/audit-trail.ts";
import { type Clock, systemClock } from "./clock.ts";
import type { Config } from "./config.ts";
import { appBounds } from "./config-limits.ts";
import { createExpressionLanes } from "./flows/expr-lanes.ts";
import { createExpressionPool } from "./flows/expr-pool.ts";
import { createFlowLifecycle, type FlowLifecycle } from "./flows/lifecycle.ts";
import { createMetrics, type Metrics } from "./http/metrics.ts";
import { createProgressHub, type ProgressHub } from "./progress/hub.ts";
import { startPgProgressRelay } from "./progress/pg-relay.ts";
import type { RunQueue } from "./queue/types.ts";
import { createErrorHandlers, type ErrorHandlers } from "./runs/error-handlers/index.ts";
import { createOwedSweep } from "./runs/error-handlers/recover.ts";
import type { FileSweeper } from "./runs/file-cleanup.ts";
import type { FlowRuns } from "./runs/flow-runs.ts";
import { createIdempotency, type Idempotency } from "./runs/idempotency.ts";
import { batchFor, createRetention, type Retention } from "./runs/retention.ts";
import { createDataDisk, type DataDisk } from "./runs/run-disk.ts";
import { createRunEvents, type RunEvents } from "./runs/run-events.ts";
import type { FlowSchedules } from "./scheduler/flow-schedules.ts";
import { startEnvCollector } from "./scripts/env-collector.ts";
import { createPythonRunner, type PythonRunner } from "./scripts/python-runner.ts";
import type { ScriptRunner } from "./scripts/runner-types.ts";
import type { ScriptEnvs } from "./scripts/script-envs.ts";
import type { SyntaxChecker } from "./scripts/syntax-check.ts";
import type { TaskService } from "./scripts/task-service.ts";
import { createSecretStore } from "./secrets/secret-store.ts";
import { createSecrets, type Secrets } from "./secrets/secrets.ts";
import {
  closeAll,
  createRuns,
  errorHandlerConfig,
  startRecovery,
  startWork,
  webhooksConfig,
} from "./service-parts.ts";
import { createIdempotencyKeys } from "./store/idempotency-keys.ts";
import { type ArtifactStore, createArtifactStore } from "./store/kysely-artifacts.ts";
import { createNoticeStore } from "./store/kysely-notices.ts";
import { createWebhookStore } from "./store/kysely-webhooks.ts";
import type { OpenedStore } from "./store/open-store.ts";
import { createRetentionStore } from "./store/retention-store.ts";
import { createTopology, type Topology } from "./topology.ts";
import { createWebhooks, type Webhooks } from "./webhooks/index.ts";

export interface Services {
  config: Config;
  clock: Clock;
  logger: Logger;
  nodeId: string;
  topology: Topology;
  store: OpenedStore;
  runner: ScriptRunner;
  /** Syntax check of uploads and inline code, in the runner's sandbox. */
  syntax: SyntaxChecker;
  /** Environments of elements' dependencies (docs/script-dependencies.md). */
  envs?: ScriptEnvs;
  events: RunEvents;
  queue: RunQueue;
  tasks: TaskService;
  lifecycle: FlowLifecycle;
  flows: FlowRuns;
  idempotency: Idempotency;
  metrics: Metrics;
  schedules: FlowSchedules;
  errorHandlers: ErrorHandlers;
  fileSweeper: FileSweeper;
  secrets: Secrets;
  webhooks: Webhooks;
  /** Who changed what (docs/audit.md); its retention purge runs on a timer. */
  audit: AuditTrail;
  /** Files runs kept (docs/artifacts.md): collected where a run executes, read by the API. */
  artifacts: { store: ArtifactStore; keeper: ArtifactKeeper };
  /** Run retention (docs/retention.md). */
  retention: Retention;
  /** Live progress of runs (docs/live-progress.md). */
  progress: ProgressHub;
  /** The data directory's disk under flow runs' script nodes (docs/security.md, "Disk"). */
  disk: DataDisk;
  close(): Promise<void>;
}

/**
 * Builds every long-lived part from the configuration, in dependency order. main.ts and the
 * integration tests both use it, so the tests exercise the real wiring.
 */
export async function createServices(opts: {
  config: Config;
  logger: Logger;
  clock?: Clock;
}): Promise<Services> {
  const { config, logger } = opts;
  const clock = opts.clock ?? systemClock;
  // Unique per process start, so a restarted process never inherits a dead one's runs.
  const nodeId = `${hostname()}:${process.pid}:${randomBytes(3).toString("hex")}`;
  const events = createRunEvents({
    clock,
    onError: (err, event) =>
      logger.error({ err, event: event.type }, "a run event observer failed"),
  });
  // The one reading of the configured mode and role (docs/architecture.md, "One topology").
  const placement = {
    mode: config.mode,
    sharedDatabaseUrl: config.mode === "cluster" ? config.databaseUrl : undefined,
    executesQueue: config.role !== "api",
    servesApi: config.role !== "worker",
  };
  const topology = await createTopology(config, placement, { logger, events, clock });
  const { store, queue, bridge } = topology;
  // A SECRETS_KEY that does not open the stored key check refuses the start (docs/secrets.md).
  const secrets = await createSecrets({
    config,
    store: createSecretStore(store.db),
    clock,
    logger,
  }).catch((err: unknown) =>
    closeAfter(err, [() => queue.stop(), () => bridge?.close(), () => store.close()]),
  );
  // What is open so far closes again when a later part refuses to start (SCRIPT_CGROUP=required
  // without cgroups, a database gone): a failed start must not leave connections or processes.
  const runner = await createPythonRunner({ config, logger, clock }).catch((err: unknown) =>
    closeAfter(err, [() => queue.stop(), () => bridge?.close(), () => store.close()]),
  );
  try {
    return await assemble({ config, logger, clock, nodeId, events, topology, runner, secrets });
  } catch (err) {
    return closeAfter(err, [
      () => queue.stop(),
      () => bridge?.close(),
      () => runner.close(),
      () => store.close(),
    ]);
  }
}

/** Closes what was opened before a failed start, then rethrows the failure that stopped it. */
async function closeAfter(err: unknown, steps: (() => Promise<void> | void)[]): Promise<never> {
  await closeAll(steps).catch(() => undefined);
  throw err;
}

/** Everything built on the topology and the runner; its background work starts last. */
async function assemble(deps: {
  config: Config;
  logger: Logger;
  clock: Clock;
  nodeId: string;
  events: RunEvents;
  topology: Topology;
  runner: PythonRunner;
  secrets: Secrets;
}): Promise<Services> {
  const { config, logger, clock, nodeId, events, topology, runner, secrets } = deps;
  const { store, queue, bridge } = topology;
  const envCollector = startEnvCollector({
    envs: runner.envs,
    store,
    clock,
    everyMs: config.python.envs.gcMs,
    logger,
  });
  const metrics = createMetrics();
  metrics.observe(events, store);
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
  metrics.watch(queue, runner);

  const artifactStore = createArtifactStore(store.db);
  const keeper = createArtifactKeeper({
    store: artifactStore,
    runs: store,
    clock,
    logger,
    limits: config.artifacts,
  });
  // Tenants' flow expressions run in child processes this one can stop, but for those whose
  // every step JSONata's own limits bound (docs/security.md, "Flow expressions").
  const expressionPool = createExpressionPool({
    config: { ...config.flowConfig.expressions, resultBytes: config.limits.resultBytes },
    clock,
    logger,
  });
  const expressions = createExpressionLanes({
    pool: expressionPool,
    inlineMs: config.flowConfig.expressions.inlineMs,
    sizeBudget: config.limits.resultBytes,
  });
  // Runs' directories on the data directory's disk, watched where their script nodes run.
  const disk = createDataDisk({
    config: { dataDir: config.dataDir, ...config.dataDisk },
    clock,
    logger,
  });
  const { tasks, flows } = createRuns({
    disk,
    expressions,
    artifacts: keeper,
    config,
    topology,
    events,
    clock,
    logger,
    nodeId,
    runner,
    metrics,
    secrets,
  });
  // Keys live in the shared database: every API node of a cluster agrees (docs/idempotency.md).
  const idempotency = createIdempotency({
    keys: createIdempotencyKeys(store.db),
    store,
    clock,
    logger,
    config: { windowS: config.idempotencyWindowS },
  });
  const lifecycle = createFlowLifecycle({
    store,
    clock,
    syntax: runner.syntax,
    secrets,
    keepRevisions: config.limits.revisionsPerFlow,
    bounds: appBounds(config.limits),
  });
  // Element changes happen through the lifecycle; cached flow locators must not outlive them.
  lifecycle.onChange(() => flows.forget());
  const notices = createNoticeStore(store.db, store.dialect);
  const errorHandlers = createErrorHandlers({
    store,
    notices,
    flows,
    tasks,
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
  const audit = createAuditTrail({
    store: createAuditStore(store.db),
    clock,
    logger,
    config: config.audit,
  });
  const recovery = await startRecovery({ config, topology, events, clock, logger, nodeId });
  // After recovery: the runs it ended have their deliveries, and those a previous life missed.
  await webhooks.start();
  // After recovery too: the runs it failed are notified by the ended events it published.
  await owed.start();
  audit.start();

  // A later part that fails to start stops what started here (createServices closes the rest).
  const { schedules, fileSweeper } = await startWork({
    config,
    topology,
    clock,
    logger,
    tasks,
    flows,
    lifecycle,
  }).catch(async (err: unknown) => {
    await closeAll([
      () => recovery.stop(),
      () => owed.stop(),
      () => webhooks.stop(),
      () => audit.stop(),
      () => expressionPool.close(),
    ]).catch(() => undefined);
    throw err;
  });
  // Every node purges: batches take disjoint rows, so nodes share the work (docs/retention.md).
  const retention = createRetention({
    store: createRetentionStore(store.db, store.dialect),
    clock,
    logger,
    config: {
      ...config.retention,
      batch: batchFor(config.retention.batch, store.dialect),
      dataDir: config.dataDir,
    },
  });
  retention.start();

  return {
    config,
    clock,
    logger,
    nodeId,
    topology,
    store,
    runner,
    syntax: runner.syntax,
    envs: runner.envs,
    events,
    queue,
    tasks,
    lifecycle,
    flows,
    idempotency,
    metrics,
    schedules,
    errorHandlers,
    fileSweeper,
    secrets,
    webhooks,
    audit,
    artifacts: { store: artifactStore, keeper },
    retention,
    progress,
    disk,
    // In this order: nothing new starts, then the work stops, then what it used closes.
    close: () =>
      closeAll([
        () => schedules.stop(),
        () => fileSweeper.stop(),
        () => retention.stop(),
        () => envCollector.stop(),
        () => recovery.stop(),
        () => owed.stop(),
        () => queue.stop(),
        () => expressionPool.close(),
        () => webhooks.stop(),
        () => audit.stop(),
        () => relay?.close(),
        () => progress.close(),
        () => bridge?.close(),
        () => runner.close(),
        () => disk.close(),
        () => store.close(),
      ]),
  };
}
