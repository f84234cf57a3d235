import { randomBytes } from "node:crypto";
import { hostname } from "node:os";
import type { Logger } from "pino";
import { type Clock, systemClock } from "./clock.ts";
import type { Config } from "./config.ts";
import { createFlowLifecycle, type FlowLifecycle } from "./flows/lifecycle.ts";
import { createMetrics, type Metrics } from "./http/metrics.ts";
import { createLocalQueue } from "./queue/local-queue.ts";
import { createPgQueue } from "./queue/pg-queue.ts";
import type { RunJob, RunQueue } from "./queue/types.ts";
import { createErrorHandlers, type ErrorHandlers } from "./runs/error-handlers/index.ts";
import { createFileSweeper, type FileSweeper } from "./runs/file-cleanup.ts";
import { createFlowRuns, type FlowRuns } from "./runs/flow-runs.ts";
import { createPgNotifyBridge, type PgNotifyBridge } from "./runs/pg-notify.ts";
import { createRecovery } from "./runs/recovery.ts";
import { createRunEvents, type RunEvents } from "./runs/run-events.ts";
import { attachScheduler, type FlowSchedules } from "./scheduler/flow-schedules.ts";
import { createPythonRunner } from "./scripts/python-runner.ts";
import type { ScriptRunner } from "./scripts/runner-types.ts";
import type { SyntaxChecker } from "./scripts/syntax-check.ts";
import { createTaskService, type TaskService } from "./scripts/task-service.ts";
import { type OpenedStore, openStore } from "./store/open-store.ts";
import { withScriptCache } from "./store/script-cache.ts";
import type { NewRun } from "./store/types.ts";

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
  metrics: Metrics;
  schedules: FlowSchedules;
  errorHandlers: ErrorHandlers;
  fileSweeper: FileSweeper;
  close(): Promise<void>;
}

/**
 * Where this process stands in the deployment (docs/architecture.md, "Topology"): the one place
 * the configured mode and role are read. Everything else is told these facts, never the mode.
 */
export interface Topology {
  /** For display only (/health, the start-up log): nothing branches on it. */
  mode: Config["mode"];
  store: OpenedStore;
  queue: RunQueue;
  /** Carries run ends between processes; null when every run ends in this one. */
  bridge: PgNotifyBridge | null;
  /** No other process uses the database: what this one wrote stays true (caches may trust it). */
  ownsDatabase: boolean;
  /** The queue hands this process's jobs back to it (in memory). */
  queueIsLocal: boolean;
  /** This process executes queued runs (not an API-only node). */
  executesQueue: boolean;
  /** This process answers the data-flow and script endpoints (not a worker-only node). */
  servesApi: boolean;
  recovery: {
    /** Runs left QUEUED by a previous life of this process go back on the queue at start. */
    requeueAtStart: boolean;
    /** Other processes share the work: their STARTED runs are failed when they stop beating. */
    sweepsOtherNodes: boolean;
  };
}

/** Reads the configuration once and opens what it names. */
export async function createTopology(
  config: Config,
  deps: { logger: Logger; events: RunEvents },
): Promise<Topology> {
  const { logger } = deps;
  const url = config.mode === "cluster" ? config.databaseUrl : undefined;
  const opened = await openStore({
    databaseUrl: config.databaseUrl,
    dataDir: config.dataDir,
    logger,
  });
  const concurrency = { flow: config.limits.flowRunsAtOnce, script: config.python.concurrency };
  const bound = config.limits.queuedRuns;
  if (url === undefined) {
    return {
      mode: config.mode,
      // One process owns an embedded database, so script lookups can be served from memory.
      store: withScriptCache(opened),
      queue: createLocalQueue({ bound, concurrency }),
      bridge: null,
      ownsDatabase: true,
      queueIsLocal: true,
      executesQueue: true,
      servesApi: true,
      recovery: { requeueAtStart: true, sweepsOtherNodes: false },
    };
  }
  const queue = await createPgQueue({ connectionString: url, bound, concurrency, logger });
  const bridge = await createPgNotifyBridge({ connectionString: url, events: deps.events, logger });
  return {
    mode: config.mode,
    store: opened,
    queue,
    bridge,
    ownsDatabase: false,
    queueIsLocal: false,
    executesQueue: config.role !== "api",
    servesApi: config.role !== "worker",
    recovery: { requeueAtStart: false, sweepsOtherNodes: true },
  };
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
  const topology = await createTopology(config, { logger, events });
  const { store, queue, bridge } = topology;
  const runner = await createPythonRunner({ config, logger });
  const metrics = createMetrics();
  metrics.observe(events, store);
  metrics.watch(queue, runner);

  const runDeps = {
    store,
    events,
    clock,
    logger,
    nodeId,
    runner,
    queue,
    limits: config.limits,
    queueIsLocal: topology.queueIsLocal,
    onScript: metrics.timeScript,
    // The run's record and its queue job: one step, so a change to one transaction fits here.
    commitQueued: async (run: NewRun, job: RunJob) => {
      await store.insertRun(run);
      // Committed runs are accepted: the bound was checked before, so it cannot refuse them now.
      await queue.enqueue(job, { ignoreBound: true });
    },
  };
  const tasks = createTaskService(runDeps);
  const flows = createFlowRuns({ ...runDeps, config, cacheLocators: topology.ownsDatabase });
  const lifecycle = createFlowLifecycle({ store, clock, syntax: runner.syntax });
  // Element changes happen through the lifecycle; cached flow locators must not outlive them.
  lifecycle.onChange(() => flows.forget());
  const fc = config.flowConfig;
  const errorHandlers = createErrorHandlers({
    store,
    flows,
    tasks,
    events,
    clock,
    logger,
    config: {
      smtpUrl: config.smtpUrl,
      smtpFrom: fc.smtpFrom,
      language: fc.notifyLanguage,
      allowPrivateWebhooks: fc.allowPrivateWebhooks,
      attempts: fc.handlerAttempts,
      backoffMs: fc.handlerBackoffMs,
      webhookTimeoutMs: fc.webhookTimeoutMs,
      customWaitS: fc.customHandlerWaitS,
    },
  });

  const recovery = createRecovery({
    store,
    queue,
    events,
    clock,
    logger,
    nodeId,
    sharedDatabase: topology.recovery.sweepsOtherNodes,
    heartbeatMs: config.heartbeatMs,
    heartbeatTimeoutMs: config.heartbeatTimeoutMs,
    requeue: topology.recovery.requeueAtStart,
  });
  const recovered = await recovery.recoverAtStart();
  if (recovered.failed || recovered.requeued) logger.info(recovered, "recovered unfinished runs");
  recovery.start();

  if (topology.executesQueue) {
    await queue.start((job) =>
      job.kind === "script" ? tasks.execute(job.runId) : flows.execute(job.runId),
    );
  }
  // Every node schedules; the database claim of each tick makes a cluster fire it once.
  const schedules = await attachScheduler({
    store,
    lifecycle,
    flows,
    clock,
    logger,
    config: { scheduleSyncMs: fc.scheduleSyncMs },
  });
  const fileSweeper = createFileSweeper({
    store,
    clock,
    logger,
    config: { dataDir: config.dataDir, ...fc },
  });
  fileSweeper.start();

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
    metrics,
    schedules,
    errorHandlers,
    fileSweeper,
    async close() {
      // Every part is closed even when one fails (a queue whose database is gone must not keep
      // the runner's processes alive); the first failure is thrown at the end.
      const failures: unknown[] = [];
      const close = async (work: () => Promise<void> | void) => {
        try {
          await work();
        } catch (err) {
          failures.push(err);
        }
      };
      await close(() => schedules.stop());
      await close(() => fileSweeper.stop());
      await close(() => recovery.stop());
      await close(() => queue.stop());
      await close(() => bridge?.close());
      await close(() => runner.close());
      await close(() => store.close());
      if (failures.length > 0) throw failures[0];
    },
  };
}
