import { randomBytes } from "node:crypto";
import { hostname } from "node:os";
import type { Logger } from "pino";
import type { ArtifactKeeper } from "./artifacts/keeper.ts";
import { createAuditStore } from "./audit/audit-store.ts";
import { type AuditTrail, createAuditTrail } from "./audit/audit-trail.ts";
import { type Clock, systemClock } from "./clock.ts";
import type { Config } from "./config.ts";
import { appBounds } from "./config-limits.ts";
import { createFlowLifecycle, type FlowLifecycle } from "./flows/lifecycle.ts";
import type { Metrics } from "./http/metrics.ts";
import type { ProgressHub } from "./progress/hub.ts";
import type { RunQueue } from "./queue/types.ts";
import type { ErrorHandlers } from "./runs/error-handlers/index.ts";
import type { FileSweeper } from "./runs/file-cleanup.ts";
import type { FlowRuns } from "./runs/flow-runs.ts";
import { createIdempotency, type Idempotency } from "./runs/idempotency.ts";
import { createRunsHere } from "./runs/orphans.ts";
import type { Retention } from "./runs/retention.ts";
import type { DataDisk } from "./runs/run-disk.ts";
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
import type { ServiceBase } from "./service-base.ts";
import { closeAll, createRunParts, startBackground } from "./service-parts.ts";
import { followRuns, observeRuns } from "./service-subscribers.ts";
import { createIdempotencyKeys } from "./store/idempotency-keys.ts";
import type { ArtifactStore } from "./store/kysely-artifacts.ts";
import type { OpenedStore } from "./store/open-store.ts";
import { createStoredQuota, type StoredQuota } from "./stored-quota.ts";
import { createTopology, type Topology } from "./topology.ts";
import type { Webhooks } from "./webhooks/index.ts";

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
  /** LIMIT_STORED_BYTES_PER_APP (docs/security.md, "What an app may store"). */
  stored: StoredQuota;
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
async function assemble(
  deps: ServiceBase & { runner: PythonRunner; secrets: Secrets },
): Promise<Services> {
  const { config, logger, clock, nodeId, events, topology, runner, secrets } = deps;
  const { store, queue, bridge } = topology;
  // What every part below is built with.
  const base = { config, topology, events, clock, logger, nodeId };
  const envCollector = startEnvCollector({
    envs: runner.envs,
    store,
    clock,
    everyMs: config.python.envs.gcMs,
    logger,
  });
  const { metrics, progress, relay } = await observeRuns({ ...base, runner });
  // LIMIT_STORED_BYTES_PER_APP: runs, deploys, uploads and imports ask it first (docs/security.md).
  const stored = createStoredQuota({ store, clock, limit: config.limits.storedBytesPerApp });
  // The runs this process holds STARTED: the orphan sweep leaves them (docs/cluster.md).
  const here = createRunsHere();
  const { artifacts, expressionPool, disk, tasks, flows } = createRunParts({
    stored,
    here,
    ...base,
    runner,
    metrics,
    secrets,
  });
  const { idempotency, lifecycle, audit } = createApiParts({
    ...base,
    runner,
    secrets,
    flows,
    stored,
  });
  const { errorHandlers, owed, webhooks } = followRuns({ ...base, flows, tasks });
  const { recovery, schedules, fileSweeper, retention, artifactsOwed } = await startBackground({
    ...base,
    tasks,
    flows,
    lifecycle,
    webhooks,
    owed,
    audit,
    expressionPool,
    disk,
    here,
    artifacts,
  });

  return {
    ...base,
    store,
    runner,
    syntax: runner.syntax,
    envs: runner.envs,
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
    artifacts,
    retention,
    progress,
    disk,
    stored,
    // In this order: nothing new starts, then the work stops, then what it used closes.
    close: () =>
      closeAll([
        () => schedules.stop(),
        () => fileSweeper.stop(),
        () => artifactsOwed.stop(),
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

/** What the API's requests use beside the runs: idempotency keys, the flow lifecycle, the audit. */
function createApiParts(
  deps: ServiceBase & {
    runner: PythonRunner;
    secrets: Secrets;
    flows: FlowRuns;
    stored: StoredQuota;
  },
): { idempotency: Idempotency; lifecycle: FlowLifecycle; audit: AuditTrail } {
  const { config, clock, logger, runner, secrets, flows, stored } = deps;
  const { store } = deps.topology;
  // Keys live in the shared database: every API node of a cluster agrees (docs/idempotency.md).
  const idempotency = createIdempotency({
    keys: createIdempotencyKeys(store.db, store.dialect),
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
    stored,
  });
  // Element changes happen through the lifecycle; cached flow locators must not outlive them.
  lifecycle.onChange(() => flows.forget());
  const audit = createAuditTrail({
    store: createAuditStore(store.db),
    clock,
    logger,
    config: config.audit,
  });
  return { idempotency, lifecycle, audit };
}
