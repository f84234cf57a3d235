import type { Logger } from "pino";
import type { Store } from "../store/types.ts";
import type { RunsHere } from "./orphans.ts";
import type { RunEvents } from "./run-events.ts";

/**
 * Ends a node did not hear (docs/cluster.md): a run this node executes may be ended by another
 * node (a terminate, the dead-node sweep after this node stalled) while the notification of that
 * end cannot reach it: its listening connection was away (reconnecting, ended by the operator),
 * or the ending node died between its commit and its NOTIFY. Nothing else would stop the run
 * here until it ends by itself or hits MAX_RUN_S. So on every beat the node reads which of the
 * runs it holds have ended, and treats each as an end heard from another node.
 */
export interface EndedElsewhere {
  /** One look: the number of held runs found ended. */
  sweep(): Promise<number>;
}

/** IDs per read; a node holds at most its slots' worth of runs, usually one read. */
const BATCH = 500;

export function createEndedElsewhere(deps: {
  store: Pick<Store, "endedAmong">;
  events: Pick<RunEvents, "notify">;
  here: Pick<RunsHere, "ids">;
  logger: Pick<Logger, "info">;
}): EndedElsewhere {
  return {
    async sweep() {
      const ids = deps.here.ids();
      let found = 0;
      for (let i = 0; i < ids.length; i += BATCH) {
        for (const runId of await deps.store.endedAmong(ids.slice(i, i + BATCH))) {
          // As the bridge relays an end: waiters wake, an execution here stops. A run whose own
          // end this node is writing is found too; it executes no more, so nothing changes.
          deps.events.notify(runId);
          found++;
        }
      }
      if (found > 0) deps.logger.info({ runs: found }, "runs held here were found ended");
      return found;
    },
  };
}
