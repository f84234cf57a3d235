import { randomBytes } from "node:crypto";
import { hostname } from "node:os";
import type { Logger } from "pino";
import { type Clock, systemClock } from "./clock.ts";
import type { Config } from "./config.ts";
import { createFlowLifecycle, type FlowLifecycle } from "./flows/lifecycle.ts";
import { createMetrics, type Metrics } from "./http/metrics.ts";
import { createLocalQueue } from "./queue/local-queue.ts";
import { createPgQueue } from "./queue/pg-queue.ts";
import type { RunQueue } from "./queue/types.ts";
import { createErrorHandlers, type ErrorHandlers } from "./runs/error-handlers/index.ts";
import { createFileSweeper, type FileSweeper } from "./runs/file-cleanup.ts";
import { createFlowRuns, type FlowRuns } from "./runs/flow-runs.ts";
import { createPgNotifyBridge } from "./runs/pg-notify.ts";
import { createRecovery } from "./runs/recovery.ts";
import { createRunEvents, type RunEvents } from "./runs/run-events.ts";
import { attachScheduler, type FlowSchedules } from "./scheduler/flow-schedules.ts";
import { createPythonRunner } from "./scripts/python-runner.ts";
import type { ScriptRunner } from "./scripts/runner-types.ts";
import type { SyntaxChecker } from "./scripts/syntax-check.ts";
import { createTaskService, type TaskService } from "./scripts/task-service.ts";
import { type OpenedStore, openStore } from "./store/open-store.ts";
import { withScriptCache } from "./store/script-cache.ts";

export interface Services {
  config: Config;
  clock: Clock;
  logger: Logger;
  nodeId: string;
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
 * Builds every long-lived part from the configuration, in dependency order. main.ts and the
 * integration tests both use it, so the tests exercise the real wiring. Embedded mode: SQLite and
 * an in-memory queue. Cluster mode: PostgreSQL, pg-boss and LISTEN/NOTIFY between nodes.
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
  const cluster = config.mode === "cluster" && config.databaseUrl !== undefined;
  const opened = await openStore({
    databaseUrl: config.databaseUrl,
    dataDir: config.dataDir,
    logger,
  });
  // One process owns an embedded database, so script lookups can be served from memory.
  const store = config.mode === "embedded" ? withScriptCache(opened) : opened;
  const runner = await createPythonRunner({ config, logger });
  // Wrapped before anything else holds them, so every run and script execution is counted.
  const metrics = createMetrics();
  metrics.instrument(store, runner);
  const events = createRunEvents({ clock });
  const concurrency = { flow: config.limits.flowRunsAtOnce, script: config.python.concurrency };
  const queue =
    cluster && config.databaseUrl
      ? await createPgQueue({
          connectionString: config.databaseUrl,
          bound: config.limits.queuedRuns,
          concurrency,
          logger,
        })
      : createLocalQueue({ bound: config.limits.queuedRuns, concurrency });
  metrics.watch(queue, runner);
  const bridge =
    cluster && config.databaseUrl
      ? await createPgNotifyBridge({ connectionString: config.databaseUrl, events, logger })
      : null;

  const tasks = createTaskService({ config, store, runner, queue, events, clock, logger, nodeId });
  const lifecycle = createFlowLifecycle({ store, clock, syntax: runner.syntax });
  // Handlers start custom runs through `flows`, which calls the handlers: bound lazily.
  let flowRuns: FlowRuns | undefined;
  const fc = config.flowConfig;
  const errorHandlers = createErrorHandlers({
    store,
    flows: () => {
      if (!flowRuns) throw new Error("flow runs are not ready");
      return flowRuns;
    },
    tasks,
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
  const flows = createFlowRuns({
    config,
    store,
    runner,
    queue,
    events,
    clock,
    logger,
    nodeId,
    hooks: errorHandlers,
  });
  // Element changes happen through the lifecycle; cached flow locators must not outlive them.
  lifecycle.onChange(() => flows.forget());
  flowRuns = flows;

  const recovery = createRecovery({
    store,
    queue,
    events,
    clock,
    logger,
    nodeId,
    mode: cluster ? "cluster" : "embedded",
    heartbeatMs: config.heartbeatMs,
    heartbeatTimeoutMs: config.heartbeatTimeoutMs,
    requeue: !cluster,
  });
  const recovered = await recovery.recoverAtStart();
  if (recovered.failed || recovered.requeued) logger.info(recovered, "recovered unfinished runs");
  recovery.start();

  // An API-only node of a cluster leaves queued work to the workers.
  if (config.role !== "api" || !cluster) {
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
