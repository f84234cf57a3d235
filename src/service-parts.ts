import type { Logger } from "pino";
import type { ArtifactKeeper } from "./artifacts/keeper.ts";
import type { Clock } from "./clock.ts";
import type { Config } from "./config.ts";
import type { ExpressionsFor } from "./flows/expr-jobs.ts";
import type { FlowLifecycle } from "./flows/lifecycle.ts";
import { outboundFetch } from "./guarded-fetch.ts";
import type { Metrics } from "./http/metrics.ts";
import type { RunJob } from "./queue/types.ts";
import type { ErrorHandlerConfig } from "./runs/error-handlers/index.ts";
import { createFileSweeper, type FileSweeper } from "./runs/file-cleanup.ts";
import { createFlowRuns, type FlowRuns } from "./runs/flow-runs.ts";
import { createQueuedShare } from "./runs/queued-share.ts";
import { createRecovery, type Recovery } from "./runs/recovery.ts";
import type { DataDisk } from "./runs/run-disk.ts";
import type { RunEvents } from "./runs/run-events.ts";
import { createLimitWakeups } from "./runs/run-limits.ts";
import { createRunMemory } from "./runs/run-memory.ts";
import { attachScheduler, type FlowSchedules } from "./scheduler/flow-schedules.ts";
import type { ScriptRunner } from "./scripts/runner-types.ts";
import { createTaskService, type TaskService } from "./scripts/task-service.ts";
import type { Secrets } from "./secrets/secrets.ts";
import type { NewRun } from "./store/types.ts";
import type { StoredQuota } from "./stored-quota.ts";
import type { Topology } from "./topology.ts";
import type { WebhooksConfig } from "./webhooks/index.ts";

/*
 * The parts src/services.ts assembles, each wired to the topology: still wiring (the one place
 * that knows the deployment's shape), split from services.ts only to keep each file short.
 */

/** Starts what runs on its own: the queue's worker side (unless API-only), schedules, the file sweeper. */
export async function startWork(deps: {
  config: Config;
  topology: Topology;
  clock: Clock;
  logger: Logger;
  tasks: TaskService;
  flows: FlowRuns;
  lifecycle: FlowLifecycle;
  disk: DataDisk;
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
    config: {
      scheduleSyncMs: fc.scheduleSyncMs,
      scheduledStartsPerApp: config.limits.scheduledStartsPerApp,
      scheduleMinIntervalMs: config.limits.scheduleMinIntervalS * 1000,
    },
    shared: topology.bridge,
  });
  const fileSweeper = createFileSweeper({
    store,
    clock,
    logger,
    config: { dataDir: config.dataDir, ...fc },
    onRemoved: deps.disk.kept.forget,
  });
  fileSweeper.start();
  return { schedules, fileSweeper };
}

/** The two executors of the one run lifecycle (docs/architecture.md), wired to the topology. */
export function createRuns(deps: {
  config: Config;
  topology: Topology;
  events: RunEvents;
  clock: Clock;
  logger: Logger;
  nodeId: string;
  runner: ScriptRunner;
  metrics: Metrics;
  secrets: Secrets;
  artifacts: ArtifactKeeper;
  expressions: ExpressionsFor;
  disk: DataDisk;
  stored: StoredQuota;
}): { tasks: TaskService; flows: FlowRuns } {
  const { config, topology } = deps;
  const { store, queue } = topology;
  const memory = createRunMemory(config.limits);
  deps.metrics.watchBudget("run", memory);
  const runDeps = {
    ...deps,
    store,
    queue,
    limits: config.limits,
    queueIsLocal: topology.queueIsLocal,
    queued: createQueuedShare({ store, clock: deps.clock, limits: config.limits }),
    memory,
    onScript: deps.metrics.timeScript,
    // The run's record and its queue job commit together (docs/cluster.md).
    commitQueued: (run: NewRun, job: RunJob) => queue.submit(run, job, store),
  };
  return {
    tasks: createTaskService(runDeps),
    flows: createFlowRuns({
      ...runDeps,
      config,
      cacheLocators: topology.ownsDatabase,
      fetch: outboundFetch({
        allowPrivate: config.flowConfig.allowPrivateHttp,
        refuse: (host) =>
          new Error(`${host} is a loopback or private address (FLOW_HTTP_ALLOW_PRIVATE=false)`),
      }),
    }),
  };
}

/**
 * Closes every part even when one fails (a queue whose database is gone must not keep the
 * runner's processes alive); the first failure is thrown at the end.
 */
export async function closeAll(steps: (() => Promise<void> | void)[]): Promise<void> {
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

/** Recovers what a previous life left unfinished, then beats (and sweeps) on a timer. */
export async function startRecovery(deps: {
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
