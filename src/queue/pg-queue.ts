import { type Job, PgBoss } from "pg-boss";
import { ErrorCode, SluiceError } from "../errors.ts";
import { createGroupCommit } from "./group-commit.ts";
import { liveJobs } from "./pg-live-jobs.ts";
import { stopping } from "./stopping.ts";
import type { RunJob, RunQueue } from "./types.ts";

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
  /** How often an idle lane looks for jobs that other nodes enqueued. */
  pollMs?: number;
  /** How often the queue depth is recounted exactly (it also feeds `depth()`). */
  recountMs?: number;
  /** Connections in pg-boss's pool. */
  poolSize?: number;
}

const DEFAULT_QUEUE = "sluice-runs";
/** The largest batch one fetch claims; a lane never claims more than it has free slots for. */
const MAX_BATCH = 100;

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
export async function createPgQueue(opts: PgQueueOptions): Promise<RunQueue> {
  const prefix = opts.queueName ?? DEFAULT_QUEUE;
  const queueOf = (kind: Kind) => `${prefix}-${kind}`;
  const limit = (kind: Kind) =>
    typeof opts.concurrency === "number" ? opts.concurrency : opts.concurrency[kind];
  const pollMs = opts.pollMs ?? 100;
  const recountMs = opts.recountMs ?? 500;
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
  // Both queues normally share pg-boss's common job table: one statement counts them.
  const countSql = [...tables.keys()]
    .map(
      (t) => `SELECT count(*)::int AS n FROM pgboss.${t} WHERE name = ANY($1) AND state < 'active'`,
    )
    .join(" UNION ALL ");
  const db = boss.getDb();

  // --- bound ---------------------------------------------------------------------------------
  // pg-boss's own counts (getQueue/getQueueStats) are cached for up to a minute, too stale for a
  // bound. An exact count per enqueue would cost a scan per job, so: estimate = last exact count
  // + jobs this process sent since − jobs this process fetched since. What other nodes send or
  // fetch shows up at the next exact count: whenever the estimate reaches the bound, and every
  // `recountMs`. So one node never overshoots, and the cluster by at most what the others sent
  // within one recount interval.
  let counted = 0;
  let sentSinceCount = 0;
  let fetchedSinceCount = 0;
  let inflight = 0;
  let recounting: Promise<void> | null = null;
  let lastRecount = 0;

  function recount(): Promise<void> {
    recounting ??= (async () => {
      const sent = sentSinceCount;
      const fetched = fetchedSinceCount;
      try {
        const { rows } = await db.executeSql(countSql, [KINDS.map(queueOf)]);
        counted = (rows as { n?: number }[]).reduce((sum, r) => sum + Number(r.n ?? 0), 0);
        sentSinceCount -= sent;
        fetchedSinceCount -= fetched;
        lastRecount = Date.now();
      } finally {
        recounting = null;
      }
    })();
    return recounting;
  }
  const estimate = () => counted + sentSinceCount - fetchedSinceCount + inflight;

  const recountTimer = setInterval(() => {
    recount().catch((err: unknown) => logger.warn({ err }, "queue depth recount failed"));
  }, recountMs);
  recountTimer.unref();

  // --- lanes ---------------------------------------------------------------------------------
  let stopped = false;
  let started = false;
  const lanes = KINDS.map((kind) => createLane(kind));

  function createLane(kind: Kind) {
    const name = queueOf(kind);
    const slots = limit(kind);
    let active = 0;
    let loop: Promise<void> = Promise.resolve();
    let wakeUp: (() => void) | null = null;
    const idle: (() => void)[] = [];
    const done: { id: string; retryCount: number }[] = [];
    let flushing: Promise<void> | null = null;

    const wake = () => {
      const w = wakeUp;
      wakeUp = null;
      w?.();
    };
    const sleep = (ms: number) =>
      new Promise<void>((resolve) => {
        const t = setTimeout(() => {
          wakeUp = null;
          resolve();
        }, ms);
        wakeUp = () => {
          clearTimeout(t);
          resolve();
        };
      });

    /** Completes finished jobs in one statement per batch instead of one per job. */
    function flush(): Promise<void> {
      flushing ??= (async () => {
        try {
          while (done.length > 0) {
            const batch = done.splice(0, 500);
            try {
              await boss.complete(name, batch);
            } catch (err) {
              // The claims expire and the jobs come back; the runs have already started, so the
              // second delivery does nothing.
              logger.warn({ err, jobs: batch.length }, "completing queue jobs failed");
            }
          }
        } finally {
          flushing = null;
        }
      })();
      return flushing;
    }

    function dispatch(job: Job<RunJob>, run: (job: RunJob) => Promise<void>): void {
      active++;
      const data = job.data;
      const valid = data && typeof data.runId === "string" && data.kind === kind;
      const work = valid
        ? run({ runId: data.runId, kind })
        : Promise.reject(new Error("malformed job"));
      // A handler records its own failures on the run; one that throws must not stall the lane.
      work
        .catch((err: unknown) =>
          logger.error({ err, jobId: job.id, data }, "run job handler failed"),
        )
        .finally(() => {
          active--;
          done.push({ id: job.id, retryCount: job.retryCount });
          void flush();
          if (active === 0) for (const f of idle.splice(0)) f();
          wake();
        });
    }

    async function fetchLoop(run: (job: RunJob) => Promise<void>): Promise<void> {
      while (!stopped) {
        const free = slots - active;
        if (free <= 0) {
          await sleep(60_000); // woken when a slot frees
          continue;
        }
        const want = Math.min(free, MAX_BATCH);
        let jobs: Job<RunJob>[] = [];
        try {
          jobs = await boss.fetch<RunJob>(name, { batchSize: want });
        } catch (err) {
          if (stopped) break;
          logger.warn({ err, queue: name }, "fetching queue jobs failed; retrying");
          await sleep(1000);
          continue;
        }
        fetchedSinceCount += jobs.length;
        for (const job of jobs) dispatch(job, run);
        // A full batch means more is probably waiting: fetch again at once.
        if (jobs.length < want && !stopped) await sleep(pollMs);
      }
    }

    return {
      kind,
      wake,
      start(run: (job: RunJob) => Promise<void>) {
        if (slots > 0) loop = fetchLoop(run);
      },
      async stop() {
        wake();
        await loop;
        if (active > 0) await new Promise<void>((r) => idle.push(r));
        await flush();
      },
    };
  }

  /** Sends through `send`, counted against the bound from before the insert to after it. */
  async function sending(job: RunJob, send: (name: string, data: RunJob) => Promise<unknown>) {
    // Reserve the place before the insert, so concurrent enqueues cannot all pass the check.
    inflight++;
    try {
      await send(queueOf(job.kind), { runId: job.runId, kind: job.kind });
      sentSinceCount++;
    } finally {
      inflight--;
    }
    // A lane in this process need not wait for its next poll.
    lanes.find((l) => l.kind === job.kind)?.wake();
  }

  const submits = createGroupCommit(async (store, batch) => {
    inflight += batch.length;
    try {
      // pg-boss inserts the jobs on the runs' own transaction: all commit, or none.
      await store.insertRunsWith(
        batch.map((b) => b.run),
        async (tx) => {
          for (const kind of KINDS) {
            const jobs = batch.filter((b) => b.job.kind === kind);
            if (jobs.length === 0) continue;
            const data = jobs.map((b) => ({ data: { runId: b.job.runId, kind } }));
            await boss.insert(queueOf(kind), data, { db: tx });
          }
        },
      );
      sentSinceCount += batch.length;
    } finally {
      inflight -= batch.length;
    }
    // A lane in this process need not wait for its next poll.
    for (const lane of lanes) if (batch.some((b) => b.job.kind === lane.kind)) lane.wake();
  });

  return {
    async submit(run, job, store) {
      if (stopped) throw stopping();
      await submits.add(store, { run, job });
    },

    liveJobs: (runIds, claimedWithinMs) =>
      liveJobs(db, [...tables.keys()], KINDS.map(queueOf), runIds, claimedWithinMs),

    async enqueue(job, enqueueOpts) {
      if (stopped) throw stopping();
      if (!enqueueOpts?.ignoreBound && estimate() >= opts.bound) {
        // Recount at most every 50 ms while full, so a flood of rejected requests costs little.
        if (Date.now() - lastRecount > 50 || recounting) await recount();
        if (estimate() >= opts.bound) {
          throw new SluiceError(ErrorCode.TOO_MANY, [`queue holds ${opts.bound} runs`]);
        }
      }
      await sending(job, (name, data) => boss.send(name, data));
    },

    async start(handler) {
      if (started) throw new Error("queue already started");
      started = true;
      for (const lane of lanes) lane.start(handler);
    },

    depth: () => Math.max(0, estimate()),

    async stop() {
      if (stopped) return;
      stopped = true;
      clearInterval(recountTimer);
      await Promise.all(lanes.map((l) => l.stop()));
      await boss.stop({ graceful: true, close: true });
    },
  };
}
