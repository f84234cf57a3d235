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
   * Jobs of this lane may be waiting that its last fetch did not see: some were announced or
   * enqueued here since that fetch began, or it came back full, or the poll interval passed.
   * Only then does the lane fetch (docs/cluster.md, "Waking the lanes").
   */
  told: boolean;
  /** One of its jobs ended since its last fetch began (a busy lane fetches then). */
  ended: boolean;
  /** When its last fetch began (clock.now()), and how many jobs it brought. */
  fetchedAt: number;
  fetched: number;
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
    told: true, // its first fetch looks for what is already queued
    ended: false,
    fetchedAt: Number.NEGATIVE_INFINITY,
    fetched: 0,
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
 * Under load the API nodes announce jobs every few milliseconds, and a fetch for each would split
 * a lane's batches (more statements per run). So a lane told of jobs fetches at once only when
 * jobs trickle in (its last fetch brought at most one) or one of its jobs just ended (a slot
 * freed while others still run); otherwise this long after its last fetch.
 */
const NUDGE_MS = 50;
/** A busy lane fetches at once only with at least this share (1/n) of its slots free. */
const REFILL_SHARE = 4;

/** Jobs of this lane were committed, here or on another node (docs/cluster.md, "Waking the lanes"). */
export function told(l: Lane): void {
  l.told = true;
  wake(l);
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
      l.ended = true;
      wake(l);
    });
}

/** How long the lane waits before its next fetch; 0: fetch now. `full`: its last batch was. */
function waitBeforeFetch(l: Lane, full: boolean): number {
  if (l.slots - l.active <= 0) return 60_000; // woken when a slot frees
  const now = l.q.clock.now();
  // A wall clock stepped back (NTP, a resumed VM) would put both waits off by the step.
  if (l.fetchedAt > now) l.fetchedAt = now;
  if (!l.told) {
    // Counted from the last fetch, so that job ends waking the lane do not put the poll off.
    const poll = l.fetchedAt + l.q.pollMs - now;
    if (poll > 0) return poll;
    l.told = true; // the poll: look for jobs nobody announced (an expired claim)
  }
  // A lane with most of its slots taken refills in batches: fetching for each slot freed was a
  // fetch and a start statement per one or two jobs (a script lane's slots mostly hold tasks
  // waiting for a Python child, so a slot refilled later costs nothing).
  const refill = l.active === 0 || l.slots - l.active >= Math.ceil(l.slots / REFILL_SHARE);
  if (refill && (full || (l.active > 0 ? l.ended : l.fetched <= 1))) return 0;
  return Math.max(0, l.fetchedAt + NUDGE_MS - now);
}

async function fetchLoop(l: Lane, run: Handler): Promise<void> {
  const { q } = l;
  let full = false;
  while (!q.stopped) {
    const wait = waitBeforeFetch(l, full);
    if (wait > 0) {
      await sleep(l, wait);
      continue;
    }
    const want = Math.min(l.slots - l.active, MAX_BATCH);
    let jobs: Job<RunJob>[] = [];
    const recounts = q.recounts;
    l.told = false;
    l.ended = false;
    l.fetchedAt = q.clock.now();
    try {
      jobs = await q.boss.fetch<RunJob>(l.name, { batchSize: want });
    } catch (err) {
      if (q.stopped) break;
      q.logger.warn({ err, queue: l.name }, "fetching queue jobs failed; retrying");
      l.told = true;
      await sleep(l, 1000);
      continue;
    }
    // A fetch that overlapped an exact count may already be in it (its jobs counted as taken),
    // and counting it here too would under-estimate the queue: leave it out, which can only
    // over-estimate it until the next count.
    if (recounts === q.recounts && !q.recounting) q.fetchedSinceCount += jobs.length;
    for (const job of jobs) dispatch(l, job, run);
    // A full batch means more is probably waiting: fetched at once. Jobs told of during the
    // fetch keep `told` set: they may have committed after it looked.
    l.fetched = jobs.length;
    full = jobs.length === want;
    if (full) l.told = true;
  }
}

export function startLane(l: Lane, run: Handler): void {
  if (l.slots > 0) l.loop = fetchLoop(l, run);
}

export async function stopLane(l: Lane): Promise<void> {
  wake(l);
  await l.loop;
  if (l.active > 0) await new Promise<void>((r) => l.idle.push(r));
  await flush(l);
}
