import type { Logger } from "pino";
import { type ArtifactKeeper, createArtifactKeeper } from "./artifacts/keeper.ts";
import { startCollectingOwed } from "./artifacts/owed.ts";
import type { AuditTrail } from "./audit/audit-trail.ts";
import type { Clock } from "./clock.ts";
import type { Config } from "./config.ts";
import type { ExpressionsFor } from "./flows/expr-jobs.ts";
import { createExpressionLanes } from "./flows/expr-lanes.ts";
import { createExpressionPool, type ExpressionPool } from "./flows/expr-pool.ts";
import type { FlowLifecycle } from "./flows/lifecycle.ts";
import { outboundFetch } from "./guarded-fetch.ts";
import type { Metrics } from "./http/metrics.ts";
import type { RunJob } from "./queue/types.ts";
import type { OwedSweep } from "./runs/error-handlers/recover.ts";
import { createFileSweeper, type FileSweeper } from "./runs/file-cleanup.ts";
import { createFlowRuns, type FlowRuns } from "./runs/flow-runs.ts";
import type { RunsHere } from "./runs/orphans.ts";
import { createQueuedShare } from "./runs/queued-share.ts";
import type { Recovery } from "./runs/recovery.ts";
import { batchFor, createRetention, type Retention } from "./runs/retention.ts";
import { createDataDisk, type DataDisk } from "./runs/run-disk.ts";
import { createRunMemory } from "./runs/run-memory.ts";
import { attachScheduler, type FlowSchedules } from "./scheduler/flow-schedules.ts";
import type { ScriptRunner } from "./scripts/runner-types.ts";
import { createTaskService, type TaskService } from "./scripts/task-service.ts";
import type { Secrets } from "./secrets/secrets.ts";
import type { ServiceBase } from "./service-base.ts";
import { startRecovery } from "./service-recovery.ts";
import { type ArtifactStore, createArtifactStore } from "./store/kysely-artifacts.ts";
import { createRetentionStore } from "./store/retention-store.ts";
import type { NewRun } from "./store/types.ts";
import type { StoredQuota } from "./stored-quota.ts";
import type { Topology } from "./topology.ts";
import type { Webhooks } from "./webhooks/index.ts";

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
      runRetentionDays: config.retention.days,
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

/** The runs' executors and what they use: kept files, flow expressions' processes, the data disk. */
export function createRunParts(deps: Omit<RunsDeps, "artifacts" | "expressions" | "disk">): {
  artifacts: { store: ArtifactStore; keeper: ArtifactKeeper };
  expressionPool: ExpressionPool;
  disk: DataDisk;
  tasks: TaskService;
  flows: FlowRuns;
} {
  const { config, topology, clock, logger } = deps;
  const { store } = topology;
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
    config: {
      dataDir: config.dataDir,
      ...config.dataDisk,
      orphanAfterMs: config.limits.maxRunS * 1000,
    },
    clock,
    logger,
    runs: store,
  });
  const { tasks, flows } = createRuns({ ...deps, disk, expressions, artifacts: keeper });
  return { artifacts: { store: artifactStore, keeper }, expressionPool, disk, tasks, flows };
}

interface RunsDeps extends ServiceBase {
  /** The runs this process holds STARTED, shared by both executors and the orphan sweep. */
  here: RunsHere;
  runner: ScriptRunner;
  metrics: Metrics;
  secrets: Secrets;
  artifacts: ArtifactKeeper;
  expressions: ExpressionsFor;
  disk: DataDisk;
  stored: StoredQuota;
}

/** The two executors of the one run lifecycle (docs/architecture.md), wired to the topology. */
function createRuns(deps: RunsDeps): { tasks: TaskService; flows: FlowRuns } {
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

/**
 * The background work, in this order: recovery of what a previous life left unfinished, the
 * deliveries and notifications owed, the audit purge, the queue's worker side and schedules (a
 * failure there stops what started before it), retention.
 */
export async function startBackground(
  deps: ServiceBase & {
    tasks: TaskService;
    flows: FlowRuns;
    lifecycle: FlowLifecycle;
    webhooks: Webhooks;
    owed: OwedSweep;
    audit: AuditTrail;
    expressionPool: ExpressionPool;
    disk: DataDisk;
    here: RunsHere;
    artifacts: { store: ArtifactStore; keeper: ArtifactKeeper };
  },
): Promise<{
  recovery: Recovery;
  schedules: FlowSchedules;
  fileSweeper: FileSweeper;
  retention: Retention;
  /** The collection of what a previous life owed (docs/artifacts.md, "After a crash"). */
  artifactsOwed: { stop(): Promise<void> };
}> {
  const { config, topology, events, clock, logger, nodeId, tasks, flows, lifecycle } = deps;
  const { webhooks, owed, audit, expressionPool, disk } = deps;
  const { store } = topology;
  const here = deps.here;
  const recovery = await startRecovery({ config, topology, events, clock, logger, nodeId, here });
  // What ended runs kept here before this start counts for their apps (after recovery ended the
  // runs a previous life left unfinished); in the background, each change joins it.
  void disk.kept.rebuild();
  // The files of runs that ended before this start and were not kept yet: this process ends its
  // own runs later, so their collections are never repeated (docs/artifacts.md, "After a crash").
  const artifactsOwed = startCollectingOwed({
    keeper: deps.artifacts.keeper,
    artifacts: deps.artifacts.store,
    store,
    dataDir: config.dataDir,
    since: clock.now(),
    logger,
  });
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
    disk,
  }).catch(async (err: unknown) => {
    await closeAll([
      () => artifactsOwed.stop(),
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
    onRemoved: disk.kept.forget,
  });
  retention.start();
  return { recovery, schedules, fileSweeper, retention, artifactsOwed };
}
