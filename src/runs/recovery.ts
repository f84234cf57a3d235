import type { Logger } from "pino";
import type { Clock, TimerHandle } from "../clock.ts";
import type { RunQueue } from "../queue/types.ts";
import type { Store } from "../store/types.ts";
import type { RunEvents } from "./run-events.ts";

/**
 * Nothing accepted is lost (docs/dataflow-service.md). Embedded mode: at start, runs left STARTED by the
 * previous process end FAILURE and QUEUED ones are queued again. Cluster mode: every node beats;
 * any live node fails the STARTED runs of a node that stopped beating; QUEUED runs stay in the
 * PostgreSQL queue and need nothing.
 */
export interface Recovery {
  recoverAtStart(): Promise<{ failed: number; requeued: number }>;
  /** One heartbeat and one sweep; the timer calls this, tests may too. */
  sweep(): Promise<number>;
  start(): void;
  stop(): Promise<void>;
}

export function createRecovery(deps: {
  store: Store;
  queue: RunQueue;
  events: RunEvents;
  clock: Clock;
  logger: Logger;
  nodeId: string;
  /**
   * Other processes share the database (the topology says so, services.ts): their STARTED runs
   * are theirs at start, and each sweep fails those of nodes that stopped beating.
   */
  sharedDatabase: boolean;
  heartbeatMs: number;
  heartbeatTimeoutMs: number;
  /** Embedded: re-queue waiting runs (their in-memory queue died with the process). */
  requeue: boolean;
}): Recovery {
  const { store, clock, events } = deps;
  let timer: TimerHandle | undefined;
  let running: Promise<unknown> = Promise.resolve();
  let stopped = false;

  async function fail(runId: string, message: string): Promise<boolean> {
    const end = {
      status: "FAILURE" as const,
      endTime: clock.now(),
      summary: message,
      error: message,
    };
    const ended = await store.endRun(runId, end);
    // Published like any other end: waiters wake, metrics count it, error handlers are called.
    if (ended) events.publish({ type: "ended", runId, end });
    return ended;
  }

  async function sweep(): Promise<number> {
    const now = clock.now();
    await store.heartbeat(deps.nodeId, now);
    if (!deps.sharedDatabase) return 0;
    let failed = 0;
    for (const run of await store.orphanedRuns(now - deps.heartbeatTimeoutMs)) {
      if (run.nodeId === deps.nodeId) continue;
      const message = `node ${run.nodeId ?? "unknown"} stopped sending heartbeats for ${deps.heartbeatTimeoutMs / 1000}s while this run was executing; the run was lost`;
      if (await fail(run.id, message)) failed++;
    }
    if (failed > 0) deps.logger.warn({ failed }, "failed runs of dead nodes");
    return failed;
  }

  function schedule(): void {
    if (stopped) return;
    timer = clock.setTimeout(() => {
      running = sweep()
        .catch((err: unknown) => deps.logger.error({ err }, "heartbeat sweep failed"))
        .finally(schedule);
    }, deps.heartbeatMs);
    timer.unref?.();
  }

  return {
    async recoverAtStart() {
      await store.heartbeat(deps.nodeId, clock.now());
      if (deps.sharedDatabase) return { failed: 0, requeued: 0 };
      let failed = 0;
      for (const run of await store.unfinishedRuns(["STARTED"])) {
        const what = run.elementType === "PY" ? "task" : "run";
        if (
          await fail(
            run.id,
            `the service restarted while this ${what} was executing; it was stopped`,
          )
        )
          failed++;
      }
      let requeued = 0;
      if (deps.requeue) {
        for (const run of await store.unfinishedRuns(["QUEUED"])) {
          const job = {
            runId: run.id,
            kind: run.elementType === "PY" ? ("script" as const) : ("flow" as const),
          };
          await deps.queue.enqueue(job, { ignoreBound: true });
          requeued++;
        }
      }
      return { failed, requeued };
    },
    sweep,
    start: schedule,
    async stop() {
      stopped = true;
      if (timer) clock.clearTimeout(timer);
      await running;
    },
  };
}
