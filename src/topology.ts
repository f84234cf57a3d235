import { randomBytes } from "node:crypto";
import type { Logger } from "pino";
import type { Clock } from "./clock.ts";
import type { Config } from "./config.ts";
import { createLocalQueue } from "./queue/local-queue.ts";
import { createPgQueue, JOBS_CHANNEL } from "./queue/pg-queue.ts";
import type { RunQueue } from "./queue/types.ts";
import { createPgNotifyBridge, type PgNotifyBridge } from "./runs/pg-notify.ts";
import type { RunEvents } from "./runs/run-events.ts";
import { type OpenedStore, openStore } from "./store/open-store.ts";
import { withScriptCache, withVersionCache } from "./store/script-cache.ts";

/**
 * Where this process stands in the deployment (docs/architecture.md, "Topology"). createServices
 * (services.ts), the one place that reads the configured mode and role, says which `Placement`
 * this process has; this file opens what that placement needs, and everything else is told these
 * facts, never the mode.
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

/** What the wiring decided from the configured mode and role. */
export interface Placement {
  /** For display only. */
  mode: Config["mode"];
  /** The database shared with other processes (cluster), or undefined: this process owns its own. */
  sharedDatabaseUrl: string | undefined;
  executesQueue: boolean;
  servesApi: boolean;
}

/** Opens what the placement needs: the store, the queue and, with a shared database, the bridge. */
export async function createTopology(
  config: Config,
  placement: Placement,
  deps: { logger: Logger; events: RunEvents; clock: Clock },
): Promise<Topology> {
  const { logger, clock } = deps;
  const url = placement.sharedDatabaseUrl;
  const opened = await openStore({
    databaseUrl: config.databaseUrl,
    dataDir: config.dataDir,
    monitorReads: config.monitorReads,
    logger,
    warmReads: placement.servesApi,
  });
  const concurrency = { flow: config.limits.flowRunsAtOnce, script: config.python.concurrency };
  const bound = config.limits.queuedRuns;
  if (url === undefined) {
    return {
      mode: placement.mode,
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
  // One tag for this node's notifications: its bridge ignores its own, whatever their channel.
  const nodeId = randomBytes(6).toString("hex");
  const queue = await createPgQueue({
    connectionString: url,
    bound,
    concurrency,
    logger,
    clock,
    announceAs: nodeId,
  });
  const bridge = await createPgNotifyBridge({
    connectionString: url,
    events: deps.events,
    logger,
    clock,
    nodeId,
    // Jobs committed by any node wake this one's idle lanes (docs/cluster.md, "Waking the
    // lanes"); a node that runs none need not hear of them.
    ...(placement.executesQueue ? { jobsChannel: JOBS_CHANNEL } : {}),
  });
  bridge.onJobs((queueName) => queue.heard(queueName));
  return {
    mode: placement.mode,
    // Other processes write the database: only what never changes is kept in memory.
    store: withVersionCache(opened),
    queue,
    bridge,
    ownsDatabase: false,
    queueIsLocal: false,
    executesQueue: placement.executesQueue,
    servesApi: placement.servesApi,
    recovery: { requeueAtStart: false, sweepsOtherNodes: true },
  };
}
