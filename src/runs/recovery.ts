import type { Logger } from "pino";
import type { Clock, TimerHandle } from "../clock.ts";
import type { RunJob, RunQueue } from "../queue/types.ts";
import type { Run, Store } from "../store/types.ts";
import type { RunEvents } from "./run-events.ts";

/**
 * Nothing accepted is lost (docs/dataflow-service.md, docs/cluster.md). Embedded mode: at start,
 * runs left STARTED by the previous process end FAILURE and QUEUED ones are queued again. Cluster
 * mode: every node beats; at its start and on every beat, a node fails the STARTED runs of nodes
 * that stopped beating, and queues again the QUEUED runs whose job is gone or held by a claim older
 * than the heartbeat timeout (a worker that died between fetching the job and starting the run).
 */
export interface Recovery {
  recoverAtStart(): Promise<{ failed: number; requeued: number }>;
  /** One heartbeat and one sweep; the timer calls this, tests may too. */
  sweep(): Promise<{ failed: number; requeued: number }>;
  start(): void;
  stop(): Promise<void>;
}

/** Lost runs queued again per sweep at most; the next beat takes the rest. */
const LOST_BATCH = 500;

const kindOf = (run: Pick<Run, "elementType">): RunJob["kind"] =>
  run.elementType === "PY" ? "script" : "flow";

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

  /** Queues again the QUEUED runs no job will deliver (only a queue whose jobs outlive a process). */
  async function requeueLost(now: number): Promise<number> {
    const { queue, heartbeatTimeoutMs } = deps;
    if (!queue.liveJobs) return 0;
    // A run younger than the timeout cannot have a stale claim, and its job committed with it.
    const runs = await store.queuedBefore(now - heartbeatTimeoutMs, LOST_BATCH);
    const live = await queue.liveJobs(
      runs.map((r) => r.id),
      heartbeatTimeoutMs,
    );
    let requeued = 0;
    for (const run of runs) {
      if (live.has(run.id)) continue;
      // A second delivery (the stale claim expiring later, another node's sweep) finds the run
      // no longer QUEUED and does nothing.
      await queue.enqueue({ runId: run.id, kind: kindOf(run) }, { ignoreBound: true });
      requeued++;
    }
    if (requeued > 0) deps.logger.warn({ requeued }, "queued again runs whose job was lost");
    return requeued;
  }

  async function sweep(): Promise<{ failed: number; requeued: number }> {
    const now = clock.now();
    await store.heartbeat(deps.nodeId, now);
    if (!deps.sharedDatabase) return { failed: 0, requeued: 0 };
    const requeued = await requeueLost(now);
    let failed = 0;
    for (const run of await store.orphanedRuns(now - deps.heartbeatTimeoutMs)) {
      if (run.nodeId === deps.nodeId) continue;
      const message = `node ${run.nodeId ?? "unknown"} stopped sending heartbeats for ${deps.heartbeatTimeoutMs / 1000}s while this run was executing; the run was lost`;
      if (await fail(run.id, message)) failed++;
    }
    if (failed > 0) deps.logger.warn({ failed }, "failed runs of dead nodes");
    return { failed, requeued };
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
      // Shared database: the other nodes' STARTED runs are theirs until they stop beating.
      if (deps.sharedDatabase) return sweep();
      await store.heartbeat(deps.nodeId, clock.now());
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
          await deps.queue.enqueue({ runId: run.id, kind: kindOf(run) }, { ignoreBound: true });
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
