import { PgBoss } from "pg-boss";
import { type Clock, systemClock, type TimerHandle } from "../clock.ts";
import { ErrorCode, SluiceError } from "../errors.ts";
import { createGroupCommit } from "./group-commit.ts";
import { createFairTurns, type FairTurns, installFairTurns } from "./pg-fair-turns.ts";
import { createLane, type Lane, type LaneHost, startLane, stopLane, told } from "./pg-lane.ts";
import { liveJobs } from "./pg-live-jobs.ts";
import { stopping } from "./stopping.ts";
import { type RunJob, type RunQueue, spaceKey } from "./types.ts";

type Kind = RunJob["kind"];
const KINDS: readonly Kind[] = ["flow", "script"];

export interface PgQueueLogger {
  warn(obj: unknown, msg?: string): void;
  error(obj: unknown, msg?: string): void;
}

export interface PgQueueOptions {
  connectionString: string;
  /** Queued (not yet fetched) jobs of both kinds across the whole cluster; beyond it enqueue answers 429. */
  bound: number;
  /**
   * Jobs this process runs at once, per kind (like the local queue's lanes); a single number
   * applies to each kind. 0 for a kind: this process never takes jobs of that kind.
   */
  concurrency: number | Record<Kind, number>;
  logger: PgQueueLogger;
  /** Prefix of the pg-boss queue names (`<prefix>-flow`, `<prefix>-script`); tests use their own. */
  queueName?: string;
  /**
   * How often an idle lane looks for jobs without being told of them: jobs whose announcement was
   * missed (the listener was reconnecting) or that came back by themselves (an expired claim).
   */
  pollMs?: number;
  /** The channel commits of jobs are announced on (NOTIFY, payload: `<announceAs>:<queue name>`). */
  jobsChannel?: string;
  /**
   * This node's tag on its announcements (its bridge's node ID), so that its own bridge ignores
   * them: its lanes are woken directly.
   */
  announceAs?: string;
  /** How often the queue depth is recounted exactly (it also feeds `depth()`). */
  recountMs?: number;
  /** Connections in pg-boss's pool. */
  poolSize?: number;
  /** The poll and recount timers; the system clock when a test builds a queue alone. */
  clock?: Clock;
}

const DEFAULT_QUEUE = "sluice-runs";
/** Where every node announces the jobs it commits; the cluster's bridge listens (src/topology.ts). */
export const JOBS_CHANNEL = "sluice_jobs";

/** The cluster's queue, which other nodes' announcements reach through the wiring. */
export interface PgRunQueue extends RunQueue {
  /**
   * Jobs of pg-boss queue `queueName` were committed on another node; null: announcements may
   * have been missed (the listener reconnected). The lanes of that queue are told (pg-lane.ts).
   */
  heard(queueName: string | null): void;
}

type Db = ReturnType<PgBoss["getDb"]>;
type Commit = Parameters<typeof createGroupCommit>[0];

/** The state one queue keeps: its pg-boss, its lanes and the counts behind the bound. */
interface PgQueue extends LaneHost {
  opts: PgQueueOptions;
  db: Db;
  queueOf: (kind: Kind) => string;
  /** pg-boss's job tables, each with the queue names it holds. */
  tables: Map<string, string[]>;
  countSql: string;
  counted: number;
  sentSinceCount: number;
  inflight: number;
  recounting: Promise<void> | null;
  lastRecount: number;
  recountTimer: TimerHandle | null;
  started: boolean;
  lanes: Lane[];
  /** Per kind: the turns its jobs are fetched in (docs/run-limits.md, "Fair turns"). */
  turns: Record<Kind, FairTurns>;
  announce: (kind: Kind) => { channel: string; payload: string };
}

/**
 * The cluster-mode run queue on pg-boss: one pg-boss queue per kind, so script slots (scarce
 * processes) and flow slots (mostly waiting) fill independently, as in the local queue. The run
 * itself is already durable in the runs table, so a job carries only `{runId, kind}`; a job
 * delivered twice (expired claim after a crashed worker) is harmless because `startRun` only moves
 * QUEUED runs.
 *
 * Lanes do not use `boss.work()`: a pg-boss worker waits for its whole batch before fetching
 * again, so one long run would hold up free slots. Instead each lane's fetch loop claims exactly as
 * many jobs as it has free slots, runs each on its own, and completes finished jobs in batches.
 */
export async function createPgQueue(opts: PgQueueOptions): Promise<PgRunQueue> {
  const prefix = opts.queueName ?? DEFAULT_QUEUE;
  const queueOf = (kind: Kind) => `${prefix}-${kind}`;
  const { logger } = opts;
  const boss = await startBoss(opts);
  const tables = await createQueues(boss, queueOf);
  await installFairTurns(boss.getDb());
  const jobsChannel = opts.jobsChannel ?? JOBS_CHANNEL;
  const announce = (kind: Kind) => ({
    channel: jobsChannel,
    payload: `${opts.announceAs ?? ""}:${queueOf(kind)}`,
  });
  const tableOf = (kind: Kind) =>
    [...tables].find(([, names]) => names.includes(queueOf(kind)))?.[0] ?? "job";
  const q: PgQueue = {
    opts,
    logger,
    boss,
    db: boss.getDb(),
    queueOf,
    tables,
    countSql: countSqlOf(tables),
    pollMs: opts.pollMs ?? 500,
    clock: opts.clock ?? systemClock,
    counted: 0,
    sentSinceCount: 0,
    fetchedSinceCount: 0,
    recounts: 0,
    inflight: 0,
    recounting: null,
    lastRecount: 0,
    recountTimer: null,
    stopped: false,
    started: false,
    lanes: [],
    turns: {
      flow: createFairTurns(queueOf("flow"), tableOf("flow"), boss.getDb(), announce("flow")),
      script: createFairTurns(
        queueOf("script"),
        tableOf("script"),
        boss.getDb(),
        announce("script"),
      ),
    },
    announce,
  };
  armRecount(q, opts.recountMs ?? 500);
  q.lanes = KINDS.map((kind) => createLane(q, kind, q.queueOf(kind), laneSlots(opts, kind)));
  const submits = createGroupCommit((store, batch) => submitBatch(q, store, batch));

  return {
    async submit(run, job, store) {
      if (q.stopped) throw stopping();
      await submits.add(store, { run, job });
    },
    liveJobs: (runIds, claimedWithinMs) =>
      liveJobs(q.db, [...tables.keys()], KINDS.map(queueOf), runIds, claimedWithinMs),
    enqueue: (job, enqueueOpts) => enqueue(q, job, enqueueOpts?.ignoreBound ?? false),
    heard(queueName) {
      for (const lane of q.lanes) if (queueName === null || lane.name === queueName) told(lane);
    },
    async start(handler) {
      if (q.started) throw new Error("queue already started");
      q.started = true;
      for (const lane of q.lanes) startLane(lane, handler);
    },
    depth: () => Math.max(0, estimate(q)),
    async stop() {
      if (q.stopped) return;
      q.stopped = true;
      if (q.recountTimer) q.clock.clearTimeout(q.recountTimer);
      await Promise.all(q.lanes.map(stopLane));
      await boss.stop({ graceful: true, close: true });
    },
  };
}

async function startBoss(opts: PgQueueOptions): Promise<PgBoss> {
  const { logger } = opts;
  const boss = new PgBoss({
    connectionString: opts.connectionString,
    max: opts.poolSize ?? 10,
    application_name: "sluice-queue",
    // Sluice has its own scheduler; pg-boss's cron machinery would only add polling.
    schedule: false,
  });
  // pg-boss reports background failures (maintenance, lost connections) as events; an unhandled
  // 'error' event would crash the process.
  boss.on("error", (err: unknown) => logger.error({ err }, "pg-boss error"));
  boss.on("warning", (w: unknown) => logger.warn({ warning: w }, "pg-boss warning"));
  await boss.start();
  return boss;
}

/** Creates one pg-boss queue per kind; answers pg-boss's job tables with the queues each holds. */
async function createQueues(
  boss: PgBoss,
  queueOf: (kind: Kind) => string,
): Promise<Map<string, string[]>> {
  const tables = new Map<string, string[]>();
  for (const kind of KINDS) {
    const name = queueOf(kind);
    await boss.createQueue(name, {
      // Retries only happen when a claim expires (a worker died holding the job): handlers never
      // throw, and a second delivery of a run that already started is a no-op.
      retryLimit: 3,
      // Completed jobs are only bookkeeping; keep the table small.
      deleteAfterSeconds: 3600,
    });
    const info = await boss.getQueue(name);
    if (!info) throw new Error(`pg-boss queue ${name} missing after createQueue`);
    tables.set(info.table, [...(tables.get(info.table) ?? []), name]);
  }
  return tables;
}

/** Both queues normally share pg-boss's common job table: one statement counts them. */
function countSqlOf(tables: Map<string, string[]>): string {
  return [...tables.keys()]
    .map(
      (t) => `SELECT count(*)::int AS n FROM pgboss.${t} WHERE name = ANY($1) AND state < 'active'`,
    )
    .join(" UNION ALL ");
}

// --- bound -----------------------------------------------------------------------------------
// pg-boss's own counts (getQueue/getQueueStats) are cached for up to a minute, too stale for a
// bound. An exact count per enqueue would cost a scan per job, so: estimate = last exact count
// + jobs this process sent since − jobs this process fetched since. What other nodes send or
// fetch shows up at the next exact count: whenever the estimate reaches the bound, and every
// `recountMs`. So one node never overshoots, and the cluster by at most what the others sent
// within one recount interval.

/** Every `ms`, whether or not the last recount has answered (a recount under way is shared). */
function armRecount(q: PgQueue, ms: number): void {
  q.recountTimer = q.clock.setTimeout(() => {
    if (q.stopped) return;
    armRecount(q, ms);
    recount(q).catch((err: unknown) => q.logger.warn({ err }, "queue depth recount failed"));
  }, ms);
  q.recountTimer.unref?.();
}

function recount(q: PgQueue): Promise<void> {
  if (!q.recounting) q.recounts++;
  q.recounting ??= (async () => {
    const sent = q.sentSinceCount;
    const fetched = q.fetchedSinceCount;
    try {
      const { rows } = await q.db.executeSql(q.countSql, [KINDS.map(q.queueOf)]);
      q.counted = (rows as { n?: number }[]).reduce((sum, r) => sum + Number(r.n ?? 0), 0);
      q.sentSinceCount -= sent;
      q.fetchedSinceCount -= fetched;
      q.lastRecount = q.clock.now();
    } finally {
      q.recounting = null;
    }
  })();
  return q.recounting;
}

function estimate(q: PgQueue): number {
  return q.counted + q.sentSinceCount - q.fetchedSinceCount + q.inflight;
}

async function enqueue(q: PgQueue, job: RunJob, ignoreBound: boolean): Promise<void> {
  if (q.stopped) throw stopping();
  const { bound } = q.opts;
  if (!ignoreBound && estimate(q) >= bound) {
    // Recount at most every 50 ms while full, so a flood of rejected requests costs little.
    if (q.clock.now() - q.lastRecount > 50 || q.recounting) await recount(q);
    if (estimate(q) >= bound) {
      throw new SluiceError(ErrorCode.TOO_MANY, [`queue holds ${bound} runs`]);
    }
  }
  // A job sent again (recovery, a freed slot) takes the current turn: it waited already.
  await sending(q, job, async (name, data) =>
    q.boss.send(name, data, { priority: -(await q.turns[job.kind].current(q.db)) }),
  );
}

/** Sends through `send`, counted against the bound from before the insert to after it. */
async function sending(
  q: PgQueue,
  job: RunJob,
  send: (name: string, data: RunJob) => Promise<unknown>,
): Promise<void> {
  // Reserve the place before the insert, so concurrent enqueues cannot all pass the check.
  q.inflight++;
  try {
    await send(q.queueOf(job.kind), { runId: job.runId, kind: job.kind });
    q.sentSinceCount++;
  } finally {
    q.inflight--;
  }
  // A lane in this process need not wait for its next poll, nor those of the other nodes: a job
  // sent alone (recovery, a freed slot) is announced after its commit, in a statement of its own.
  const lane = q.lanes.find((l) => l.kind === job.kind);
  if (lane) told(lane);
  const { channel, payload } = q.announce(job.kind);
  q.db
    .executeSql("SELECT pg_notify($1, $2)", [channel, payload])
    .catch((err: unknown) => q.logger.warn({ err }, "announcing a queued job failed"));
}

async function submitBatch(
  q: PgQueue,
  store: Parameters<Commit>[0],
  batch: Parameters<Commit>[1],
): Promise<void> {
  q.inflight += batch.length;
  try {
    // pg-boss inserts the jobs on the runs' own transaction: all commit, or none.
    await store.insertRunsWith(
      batch.map((b) => b.run),
      async (tx) => {
        for (const kind of KINDS) {
          const jobs = batch.filter((b) => b.job.kind === kind);
          if (jobs.length === 0) continue;
          const turns = await q.turns[kind].take(
            tx,
            jobs.map((b) => spaceKey(b.run.scope)),
          );
          const data = jobs.map((b, i) => ({
            data: { runId: b.job.runId, kind },
            priority: -(turns[i] as number),
          }));
          await q.boss.insert(q.queueOf(kind), data, { db: tx });
        }
      },
    );
    q.sentSinceCount += batch.length;
  } finally {
    q.inflight -= batch.length;
  }
  // A lane in this process need not wait for its next poll.
  for (const lane of q.lanes) if (batch.some((b) => b.job.kind === lane.kind)) told(lane);
}

function laneSlots(opts: PgQueueOptions, kind: Kind): number {
  return typeof opts.concurrency === "number" ? opts.concurrency : opts.concurrency[kind];
}
