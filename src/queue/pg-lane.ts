import type { Job, PgBoss } from "pg-boss";
import type { Clock, TimerHandle } from "../clock.ts";
import type { RunJob } from "./types.ts";

type Kind = RunJob["kind"];
type Handler = (job: RunJob) => Promise<void>;

/** The largest batch one fetch claims; a lane never claims more than it has free slots for. */
const MAX_BATCH = 100;

/**
 * Finished jobs are completed together at most this long after the first of them, or at once when
 * this many wait. Completing a job is bookkeeping only (the run's own row says it ended), and a job
 * left active by a process that died before completing it only comes back to find its run no
 * longer QUEUED, which does nothing: so one statement per 50 ms instead of one per few runs.
 */
const COMPLETE_AFTER_MS = 50;
const COMPLETE_AT = 200;

/** What a lane uses of its queue: pg-boss, the poll interval, and the count of fetched jobs. */
export interface LaneHost {
  boss: PgBoss;
  logger: { warn(obj: unknown, msg?: string): void; error(obj: unknown, msg?: string): void };
  pollMs: number;
  clock: Clock;
  stopped: boolean;
  /** Jobs this process fetched since the last exact count (see pg-queue.ts, "bound"). */
  fetchedSinceCount: number;
  /** Exact counts started so far, and the one under way: a fetch that overlaps one is not counted. */
  recounts: number;
  recounting: Promise<void> | null;
}

/** The state of one kind's lane: its free slots, its fetch loop and the jobs to complete. */
export interface Lane {
  q: LaneHost;
  kind: Kind;
  name: string;
  slots: number;
  active: number;
  loop: Promise<void>;
  wakeUp: (() => void) | null;
  /**
   * Another node announced jobs of this lane since its last fetch began: a fetch under way may
   * have run before their commit, so the lane fetches again instead of sleeping.
   */
  told: boolean;
  /** The pending wake of a lane told of jobs (NUDGE_MS). */
  nudge: TimerHandle | null;
  /** When its last fetch began (clock.now()). */
  fetchedAt: number;
  idle: (() => void)[];
  done: { id: string; retryCount: number }[];
  flushing: Promise<void> | null;
  /** The pending flush of `done` (COMPLETE_AFTER_MS). */
  flushTimer: TimerHandle | null;
}

export function createLane(q: LaneHost, kind: Kind, name: string, slots: number): Lane {
  return {
    q,
    kind,
    name,
    slots,
    active: 0,
    loop: Promise.resolve(),
    wakeUp: null,
    told: false,
    nudge: null,
    fetchedAt: Number.NEGATIVE_INFINITY,
    idle: [],
    done: [],
    flushing: null,
    flushTimer: null,
  };
}

export function wake(l: Lane): void {
  const w = l.wakeUp;
  l.wakeUp = null;
  w?.();
}

/**
 * An announcement makes a lane fetch at most this often. Under load the API nodes announce every
 * few milliseconds, and a fetch for each would split the lane's batches (more statements per
 * run); its own jobs' ends wake a busy lane sooner anyway. An idle lane that has not fetched for
 * this long fetches at once.
 */
const NUDGE_MS = 50;

/** Jobs of this lane were committed somewhere (docs/cluster.md, "Waking the lanes"). */
export function told(l: Lane): void {
  // A stopped lane fetches no more: a nudge armed now would only fire after its stop.
  if (l.q.stopped) return;
  const since = l.q.clock.now() - l.fetchedAt;
  const delay = l.active > 0 ? NUDGE_MS : Math.max(0, NUDGE_MS - since);
  if (delay === 0) {
    l.told = true;
    wake(l);
    return;
  }
  l.nudge ??= l.q.clock.setTimeout(() => {
    l.nudge = null;
    l.told = true;
    wake(l);
  }, delay);
}

function sleep(l: Lane, ms: number): Promise<void> {
  return new Promise<void>((resolve) => {
    const t = l.q.clock.setTimeout(() => {
      l.wakeUp = null;
      resolve();
    }, ms);
    l.wakeUp = () => {
      l.q.clock.clearTimeout(t);
      resolve();
    };
  });
}

/** Completes finished jobs in one statement per batch instead of one per job. */
function flush(l: Lane): Promise<void> {
  if (l.flushTimer) l.q.clock.clearTimeout(l.flushTimer);
  l.flushTimer = null;
  l.flushing ??= (async () => {
    try {
      while (l.done.length > 0) {
        const batch = l.done.splice(0, 500);
        try {
          await l.q.boss.complete(l.name, batch);
        } catch (err) {
          // The claims expire and the jobs come back; the runs have already started, so the
          // second delivery does nothing.
          l.q.logger.warn({ err, jobs: batch.length }, "completing queue jobs failed");
        }
      }
    } finally {
      l.flushing = null;
    }
  })();
  return l.flushing;
}

function dispatch(l: Lane, job: Job<RunJob>, run: Handler): void {
  const { kind } = l;
  l.active++;
  const data = job.data;
  const valid = data && typeof data.runId === "string" && data.kind === kind;
  const work = valid
    ? run({ runId: data.runId, kind })
    : Promise.reject(new Error("malformed job"));
  // A handler records its own failures on the run; one that throws must not stall the lane.
  work
    .catch((err: unknown) =>
      l.q.logger.error({ err, jobId: job.id, data }, "run job handler failed"),
    )
    .finally(() => {
      l.active--;
      l.done.push({ id: job.id, retryCount: job.retryCount });
      if (l.done.length >= COMPLETE_AT) void flush(l);
      else
        l.flushTimer ??= l.q.clock.setTimeout(() => {
          l.flushTimer = null;
          void flush(l);
        }, COMPLETE_AFTER_MS);
      if (l.active === 0) for (const f of l.idle.splice(0)) f();
      wake(l);
    });
}

async function fetchLoop(l: Lane, run: Handler): Promise<void> {
  const { q } = l;
  while (!q.stopped) {
    const free = l.slots - l.active;
    if (free <= 0) {
      await sleep(l, 60_000); // woken when a slot frees
      continue;
    }
    const want = Math.min(free, MAX_BATCH);
    let jobs: Job<RunJob>[] = [];
    const recounts = q.recounts;
    l.told = false;
    if (l.nudge) l.q.clock.clearTimeout(l.nudge);
    l.nudge = null;
    l.fetchedAt = q.clock.now();
    try {
      jobs = await q.boss.fetch<RunJob>(l.name, { batchSize: want });
    } catch (err) {
      if (q.stopped) break;
      q.logger.warn({ err, queue: l.name }, "fetching queue jobs failed; retrying");
      await sleep(l, 1000);
      continue;
    }
    // A fetch that overlapped an exact count may already be in it (its jobs counted as taken),
    // and counting it here too would under-estimate the queue: leave it out, which can only
    // over-estimate it until the next count.
    if (recounts === q.recounts && !q.recounting) q.fetchedSinceCount += jobs.length;
    for (const job of jobs) dispatch(l, job, run);
    // A full batch means more is probably waiting: fetch again at once. After a short one, jobs
    // announced during the fetch may have been committed after it looked: told again.
    if (jobs.length < want && !q.stopped) {
      if (l.told) {
        l.told = false;
        told(l);
      }
      if (!l.told) await sleep(l, q.pollMs);
    }
  }
}

export function startLane(l: Lane, run: Handler): void {
  if (l.slots > 0) l.loop = fetchLoop(l, run);
}

export async function stopLane(l: Lane): Promise<void> {
  if (l.nudge) l.q.clock.clearTimeout(l.nudge);
  l.nudge = null;
  wake(l);
  await l.loop;
  if (l.active > 0) await new Promise<void>((r) => l.idle.push(r));
  await flush(l);
}
