import { pino } from "pino";
import { type Clock, systemClock } from "../../src/clock.ts";
import { ErrorCode } from "../../src/errors.ts";
import type { RunQueue } from "../../src/queue/types.ts";
import type { LifecycleDeps } from "../../src/runs/lifecycle-types.ts";
import { createRunsHere } from "../../src/runs/orphans.ts";
import { createQueuedShare } from "../../src/runs/queued-share.ts";
import type { RunEvents } from "../../src/runs/run-events.ts";
import { UNBOUNDED_RUN_MEMORY } from "../../src/runs/run-memory.ts";
import type { Store } from "../../src/store/types.ts";

/**
 * The dependencies of a run lifecycle as the tests of src/runs build it alone: a store, its
 * events, a local queue its QUEUED runs are committed to, no memory bound, a queue bound of
 * `queuedRuns` (100). Override any field with a spread.
 */
export function lifecycleDeps(o: {
  store: Store;
  events: RunEvents;
  queue: Pick<RunQueue, "submit">;
  clock?: Clock;
  queuedRuns?: number;
}): LifecycleDeps {
  const clock = o.clock ?? systemClock;
  const queuedRuns = o.queuedRuns ?? 100;
  return {
    store: o.store,
    events: o.events,
    clock,
    logger: pino({ level: "silent" }),
    nodeId: "n",
    limits: { maxRunS: 60, maxWaitS: 5, resultBytes: 1 << 20 },
    queue: { reserve: () => null },
    memory: UNBOUNDED_RUN_MEMORY,
    queued: createQueuedShare({
      store: o.store,
      clock,
      limits: { queuedRuns, queuedRunsPerApp: queuedRuns, queuedRunsReserve: 0 },
    }),
    commitQueued: (run, job) => o.queue.submit(run, job, o.store),
    queueIsLocal: true,
    here: createRunsHere(),
    notFound: ErrorCode.RUN_NOT_FOUND,
  };
}
