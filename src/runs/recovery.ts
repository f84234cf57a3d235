import type { Logger } from "pino";
import type { Clock, TimerHandle } from "../clock.ts";
import type { RunJob, RunQueue } from "../queue/types.ts";
import type { Run, RunEnd, Store } from "../store/types.ts";
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

/**
 * A node's row is written at its start and never again once it stops, one per process start: a
 * row silent this long (or HEARTBEAT_TIMEOUT_MS, when longer: such a node is still alive by the
 * rules) is deleted (docs/cluster.md, "Heartbeats"), at most once per
 * FORGET_EVERY_MS by each node. A day keeps a node's start time for whoever looks into a run it
 * held; its runs need no row (a node without one is not live, as one silent past the timeout).
 */
export const NODE_ROWS_KEPT_MS = 24 * 3600_000;
const FORGET_EVERY_MS = 3600_000;

const kindOf = (run: Pick<Run, "elementType">): RunJob["kind"] =>
  run.elementType === "PY" ? "script" : "flow";

interface RecoveryDeps {
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
  /** Runs waiting for a slot of their limited element (run-limits.ts): woken on every beat. */
  waiting?: { sweep(): Promise<number> } | undefined;
  /** Shared database: the runs held here that another node ended (ended-elsewhere.ts), on every beat. */
  endedElsewhere?: { sweep(): Promise<number> } | undefined;
}

/** The state one recovery keeps: its dependencies and the heartbeat timer. */
interface RecoveryState {
  deps: RecoveryDeps;
  timer: TimerHandle | undefined;
  running: Promise<unknown>;
  stopped: boolean;
  /** When this node last deleted the rows of long-gone nodes (clock.now()). */
  forgotAt: number;
}

type Recovered = { failed: number; requeued: number };

export function createRecovery(deps: RecoveryDeps): Recovery {
  const r: RecoveryState = {
    deps,
    timer: undefined,
    running: Promise.resolve(),
    stopped: false,
    forgotAt: Number.NEGATIVE_INFINITY,
  };
  return {
    recoverAtStart: () => recoverAtStart(r),
    sweep: () => sweep(r),
    start: () => schedule(r),
    async stop() {
      r.stopped = true;
      if (r.timer) deps.clock.clearTimeout(r.timer);
      await r.running;
    },
  };
}

/** The FAILURE end of a run this process did not execute (a lost run): `message` says why. */
export function lostEnd(
  run: Pick<Run, "elementType">,
  message: string,
  endTime: number,
  nodeId: string,
): RunEnd {
  // A flow run's release is not read here: its end is marked as owing notifications whatever it
  // says, and the error handlers clear the mark of one without handlers (docs/error-handlers.md).
  return {
    status: "FAILURE" as const,
    endTime,
    summary: message,
    error: message,
    ...(run.elementType === "DPL" ? { notifyBy: nodeId } : {}),
  };
}

async function fail(
  r: RecoveryState,
  run: Pick<Run, "id" | "elementType">,
  message: string,
): Promise<boolean> {
  const { store, clock, events, nodeId } = r.deps;
  const runId = run.id;
  const end = lostEnd(run, message, clock.now(), nodeId);
  const ended = await store.endRun(runId, end);
  // Published like any other end: waiters wake, metrics count it, error handlers are called.
  if (ended) events.publish({ type: "ended", runId, end });
  return ended;
}

/** Queues again the QUEUED runs no job will deliver (only a queue whose jobs outlive a process). */
async function requeueLost(r: RecoveryState, now: number): Promise<number> {
  const { store, queue, heartbeatTimeoutMs } = r.deps;
  if (!queue.liveJobs) return 0;
  // A run younger than the timeout cannot have a stale claim, and its job committed with it.
  const runs = await store.queuedBefore(now - heartbeatTimeoutMs, LOST_BATCH);
  const live = await queue.liveJobs(
    runs.map((run) => run.id),
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
  if (requeued > 0) r.deps.logger.warn({ requeued }, "queued again runs whose job was lost");
  return requeued;
}

/** Beats, and now and then deletes the rows of nodes long gone. */
async function beat(r: RecoveryState, now: number): Promise<void> {
  const { store } = r.deps;
  await store.heartbeat(r.deps.nodeId, now);
  // A wall clock stepped back would otherwise put the next pass off by the step.
  if (now - r.forgotAt < FORGET_EVERY_MS && now >= r.forgotAt) return;
  r.forgotAt = now;
  // Never a node still alive by the rules: a HEARTBEAT_TIMEOUT_MS longer than the day keeps it.
  const timeoutMs = Math.max(NODE_ROWS_KEPT_MS, r.deps.heartbeatTimeoutMs);
  try {
    const forgotten = await store.forgetNodes({ now, timeoutMs });
    if (forgotten > 0) r.deps.logger.info({ forgotten, timeoutMs }, "forgot nodes long silent");
  } catch (err) {
    // Housekeeping: the start and the rest of the beat go on; the next pass is an hour away.
    r.deps.logger.error({ err }, "could not delete the rows of long-silent nodes");
  }
}

async function sweep(r: RecoveryState): Promise<Recovered> {
  const { deps } = r;
  const { store } = deps;
  const now = deps.clock.now();
  await beat(r, now);
  if (!deps.sharedDatabase) {
    await deps.waiting?.sweep();
    return { failed: 0, requeued: 0 };
  }
  // First: a node that stalled past the timeout stops what others ended meanwhile. A failed
  // look is logged and tried at the next beat; the dead nodes' runs are failed all the same.
  await deps.endedElsewhere
    ?.sweep()
    .catch((err: unknown) => deps.logger.error({ err }, "could not look for ended runs held here"));
  const requeued = await requeueLost(r, now);
  let failed = 0;
  for (const run of await store.orphanedRuns({ now, timeoutMs: deps.heartbeatTimeoutMs })) {
    if (run.nodeId === deps.nodeId) continue;
    const message = `node ${run.nodeId ?? "unknown"} stopped sending heartbeats for ${deps.heartbeatTimeoutMs / 1000}s while this run was executing; the run was lost`;
    if (await fail(r, run, message)) failed++;
  }
  if (failed > 0) deps.logger.warn({ failed }, "failed runs of dead nodes");
  // After the dead nodes' runs failed: their slots are free for the runs that wait.
  await deps.waiting?.sweep();
  return { failed, requeued };
}

function schedule(r: RecoveryState): void {
  const { deps } = r;
  if (r.stopped) return;
  r.timer = deps.clock.setTimeout(() => {
    r.running = sweep(r)
      .catch((err: unknown) => deps.logger.error({ err }, "heartbeat sweep failed"))
      .finally(() => schedule(r));
  }, deps.heartbeatMs);
  r.timer.unref?.();
}

async function recoverAtStart(r: RecoveryState): Promise<Recovered> {
  const { deps } = r;
  const { store } = deps;
  // Shared database: the other nodes' STARTED runs are theirs until they stop beating.
  if (deps.sharedDatabase) return sweep(r);
  await beat(r, deps.clock.now());
  let failed = 0;
  for (const run of await store.unfinishedRuns(["STARTED"])) {
    const what = run.elementType === "PY" ? "task" : "run";
    if (
      await fail(r, run, `the service restarted while this ${what} was executing; it was stopped`)
    )
      failed++;
  }
  let requeued = 0;
  if (deps.requeue) {
    for (const run of await store.unfinishedRuns(["QUEUED"])) {
      const job = { runId: run.id, kind: kindOf(run), scope: run.scope };
      await deps.queue.enqueue(job, { ignoreBound: true });
      requeued++;
    }
  }
  return { failed, requeued };
}
