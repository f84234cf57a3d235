import { createEndedElsewhere } from "./runs/ended-elsewhere.ts";
import { createOrphanSweep, type RunsHere } from "./runs/orphans.ts";
import { createRecovery, type Recovery } from "./runs/recovery.ts";
import { createLimitWakeups } from "./runs/run-limits.ts";
import type { ServiceBase } from "./service-base.ts";

/*
 * Wiring of recovery (docs/cluster.md, "Nothing accepted is lost"), split from service-parts.ts
 * only to keep each file short.
 */

/**
 * Recovers what a previous life left unfinished, then beats (and sweeps) on a timer; and, on its
 * own timer, ends the runs STARTED here that nothing here executes (orphans.ts). Its stop stops both.
 */
export async function startRecovery(deps: ServiceBase & { here: RunsHere }): Promise<Recovery> {
  const { config, topology, logger } = deps;
  const waiting = createLimitWakeups({
    store: topology.store,
    queue: topology.queue,
    events: deps.events,
    logger,
    heartbeatTimeoutMs: config.heartbeatTimeoutMs,
  });
  const endedElsewhere = createEndedElsewhere({
    store: topology.store,
    events: deps.events,
    here: deps.here,
    logger,
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
    endedElsewhere,
  });
  const recovered = await recovery.recoverAtStart();
  if (recovered.failed || recovered.requeued) logger.info(recovered, "recovered unfinished runs");
  recovery.start();
  const { events, clock, nodeId, here } = deps;
  const orphans = createOrphanSweep({
    store: topology.store,
    events,
    clock,
    logger,
    nodeId,
    here,
    everyMs: config.orphanSweepMs,
  });
  orphans.start();
  return {
    ...recovery,
    // The sweep's stop never throws: a failed sweep is logged.
    async stop() {
      await orphans.stop();
      await recovery.stop();
    },
  };
}
