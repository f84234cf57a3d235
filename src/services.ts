import { randomBytes } from "node:crypto";
import { hostname } from "node:os";
import type { Logger } from "pino";
import { type Clock, systemClock } from "./clock.ts";
import type { Config } from "./config.ts";
import { createFlowLifecycle, type FlowLifecycle } from "./flows/lifecycle.ts";
import { createMetrics, type Metrics } from "./http/metrics.ts";
import { createProgressHub, type ProgressHub } from "./progress/hub.ts";
import { startPgProgressRelay } from "./progress/pg-relay.ts";
import type { RunJob, RunQueue } from "./queue/types.ts";
import {
  createErrorHandlers,
  type ErrorHandlerConfig,
  type ErrorHandlers,
} from "./runs/error-handlers/index.ts";
import { createFileSweeper, type FileSweeper } from "./runs/file-cleanup.ts";
import { createFlowRuns, type FlowRuns } from "./runs/flow-runs.ts";
import { createIdempotency, type Idempotency } from "./runs/idempotency.ts";
import { createRecovery, type Recovery } from "./runs/recovery.ts";
import { createRunEvents, type RunEvents } from "./runs/run-events.ts";
import { createLimitWakeups } from "./runs/run-limits.ts";
import { attachScheduler, type FlowSchedules } from "./scheduler/flow-schedules.ts";
import { createPythonRunner, type PythonRunner } from "./scripts/python-runner.ts";
import type { ScriptRunner } from "./scripts/runner-types.ts";
import type { SyntaxChecker } from "./scripts/syntax-check.ts";
import { createTaskService, type TaskService } from "./scripts/task-service.ts";
import { createSecretStore } from "./secrets/secret-store.ts";
import { createSecrets, type Secrets } from "./secrets/secrets.ts";
import { createIdempotencyKeys } from "./store/idempotency-keys.ts";
import { createWebhookStore } from "./store/kysely-webhooks.ts";
import type { OpenedStore } from "./store/open-store.ts";
import type { NewRun } from "./store/types.ts";
import { createTopology, type Topology } from "./topology.ts";
import { createWebhooks, type Webhooks, type WebhooksConfig } from "./webhooks/index.ts";

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
  /** Live progress of runs (docs/live-progress.md). */
  progress: ProgressHub;
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

  const { tasks, flows } = createRuns({
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
  const lifecycle = createFlowLifecycle({ store, clock, syntax: runner.syntax, secrets });
  // Element changes happen through the lifecycle; cached flow locators must not outlive them.
  lifecycle.onChange(() => flows.forget());
  const errorHandlers = createErrorHandlers({
    store,
    flows,
    tasks,
    events,
    clock,
    logger,
    config: errorHandlerConfig(config),
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
  const recovery = await startRecovery({ config, topology, events, clock, logger, nodeId });
  // After recovery: the runs it ended have their deliveries, and those a previous life missed.
  await webhooks.start();

  const { schedules, fileSweeper } = await startWork({
    config,
    topology,
    clock,
    logger,
    tasks,
    flows,
    lifecycle,
  });

  return {
    config,
    clock,
    logger,
    nodeId,
    topology,
    store,
    runner,
    syntax: runner.syntax,
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
    progress,
    // In this order: nothing new starts, then the work stops, then what it used closes.
    close: () =>
      closeAll([
        () => schedules.stop(),
        () => fileSweeper.stop(),
        () => recovery.stop(),
        () => queue.stop(),
        () => webhooks.stop(),
        () => relay?.close(),
        () => progress.close(),
        () => bridge?.close(),
        () => runner.close(),
        () => store.close(),
      ]),
  };
}

/** Starts what runs on its own: the queue's worker side (unless API-only), schedules, the file sweeper. */
async function startWork(deps: {
  config: Config;
  topology: Topology;
  clock: Clock;
  logger: Logger;
  tasks: TaskService;
  flows: FlowRuns;
  lifecycle: FlowLifecycle;
}): Promise<{ schedules: FlowSchedules; fileSweeper: FileSweeper }> {
  const { config, topology, clock, logger, tasks, flows } = deps;
  const { store, queue } = topology;
  const fc = config.flowConfig;
  if (topology.executesQueue) {
    await queue.start((job) =>
      job.kind === "script" ? tasks.execute(job.runId) : flows.execute(job.runId),
    );
  }
  // Every node schedules; the database claim of each tick makes a cluster fire it once.
  const schedules = await attachScheduler({
    store,
    lifecycle: deps.lifecycle,
    flows,
    clock,
    logger,
    config: { scheduleSyncMs: fc.scheduleSyncMs },
    shared: topology.bridge,
  });
  const fileSweeper = createFileSweeper({
    store,
    clock,
    logger,
    config: { dataDir: config.dataDir, ...fc },
  });
  fileSweeper.start();
  return { schedules, fileSweeper };
}

/** The two executors of the one run lifecycle (docs/architecture.md), wired to the topology. */
function createRuns(deps: {
  config: Config;
  topology: Topology;
  events: RunEvents;
  clock: Clock;
  logger: Logger;
  nodeId: string;
  runner: ScriptRunner;
  metrics: Metrics;
  secrets: Secrets;
}): { tasks: TaskService; flows: FlowRuns } {
  const { config, topology } = deps;
  const { store, queue } = topology;
  const runDeps = {
    ...deps,
    store,
    queue,
    limits: config.limits,
    queueIsLocal: topology.queueIsLocal,
    onScript: deps.metrics.timeScript,
    // The run's record and its queue job commit together (docs/cluster.md).
    commitQueued: (run: NewRun, job: RunJob) => queue.submit(run, job, store),
  };
  return {
    tasks: createTaskService(runDeps),
    flows: createFlowRuns({ ...runDeps, config, cacheLocators: topology.ownsDatabase }),
  };
}

/**
 * Closes every part even when one fails (a queue whose database is gone must not keep the
 * runner's processes alive); the first failure is thrown at the end.
 */
async function closeAll(steps: (() => Promise<void> | void)[]): Promise<void> {
  const failures: unknown[] = [];
  for (const step of steps) {
    try {
      await step();
    } catch (err) {
      failures.push(err);
    }
  }
  if (failures.length > 0) throw failures[0];
}

function errorHandlerConfig(config: Config): ErrorHandlerConfig {
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
  };
}

function webhooksConfig(config: Config): WebhooksConfig {
  return {
    ...config.webhooks,
    timeoutMs: config.flowConfig.webhookTimeoutMs,
    allowPrivate: config.flowConfig.allowPrivateWebhooks,
    dataflowPrefix: config.dataflowPrefix,
    scriptPrefix: config.scriptPrefix,
  };
}

/** Recovers what a previous life left unfinished, then beats (and sweeps) on a timer. */
async function startRecovery(deps: {
  config: Config;
  topology: Topology;
  events: RunEvents;
  clock: Clock;
  logger: Logger;
  nodeId: string;
}): Promise<Recovery> {
  const { config, topology, logger } = deps;
  const waiting = createLimitWakeups({
    store: topology.store,
    queue: topology.queue,
    events: deps.events,
    logger,
    heartbeatTimeoutMs: config.heartbeatTimeoutMs,
  });
  const recovery = createRecovery({
    store: topology.store,
    queue: topology.queue,
    events: deps.events,
    clock: deps.clock,
    logger,
    nodeId: deps.nodeId,
    sharedDatabase: topology.recovery.sweepsOtherNodes,
    heartbeatMs: config.heartbeatMs,
    heartbeatTimeoutMs: config.heartbeatTimeoutMs,
    requeue: topology.recovery.requeueAtStart,
    waiting,
  });
  const recovered = await recovery.recoverAtStart();
  if (recovered.failed || recovered.requeued) logger.info(recovered, "recovered unfinished runs");
  recovery.start();
  return recovery;
}
