import { ErrorCode, SluiceError } from "../errors.ts";
import { createFairFifo, type FairFifo } from "./fair-fifo.ts";
import { stopping } from "./stopping.ts";
import { type QueueSlot, type RunJob, type RunQueue, spaceKey } from "./types.ts";

type Kind = RunJob["kind"];

interface LocalQueueOptions {
  bound: number;
  concurrency: Record<Kind, number>;
}

/** The state one local queue keeps: fair turns per kind, its handler, and who waits for idle. */
interface LocalQueue {
  opts: LocalQueueOptions;
  lanes: Record<Kind, { pending: FairFifo<RunJob>; active: number }>;
  /** Jobs not yet handed to the handler, per run: a run with one needs no other (run-limits.ts). */
  pendingRuns: Map<string, number>;
  handler: ((job: RunJob) => Promise<void>) | null;
  stopped: boolean;
  idle: (() => void)[];
}

/**
 * The embedded-mode queue: per kind, in-memory FIFOs per space taken in turns (docs/run-limits.md),
 * behind the kind's own concurrency bound (script slots are scarce processes; flow slots mostly
 * wait). Durability comes from the store:
 * jobs are runs already committed as QUEUED, and restart recovery re-enqueues them.
 */
export function createLocalQueue(opts: LocalQueueOptions): RunQueue {
  const q: LocalQueue = {
    opts,
    lanes: {
      flow: { pending: createFairFifo(), active: 0 },
      script: { pending: createFairFifo(), active: 0 },
    },
    pendingRuns: new Map(),
    handler: null,
    stopped: false,
    idle: [],
  };
  return {
    enqueue: async (job, enqueueOpts) => enqueue(q, job, enqueueOpts?.ignoreBound ?? false),
    // Only a job not yet handed out: one being handled may already have failed its claim.
    liveJobs: async (runIds) => new Set(runIds.filter((id) => q.pendingRuns.has(id))),
    async submit(run, job, store) {
      if (q.stopped) throw stopping();
      await store.insertRun(run);
      await this.enqueue(job, { ignoreBound: true });
    },
    async start(h) {
      q.handler = h;
      pump(q, "flow");
      pump(q, "script");
    },
    depth: () => size(q),
    reserve: (kind) => reserve(q, kind),
    async stop() {
      q.stopped = true;
      if (activeCount(q) > 0) await new Promise<void>((r) => q.idle.push(r));
    },
  };
}

function size({ lanes }: LocalQueue): number {
  return lanes.flow.pending.size + lanes.script.pending.size;
}

function activeCount({ lanes }: LocalQueue): number {
  return lanes.flow.active + lanes.script.active;
}

function enqueue(q: LocalQueue, job: RunJob, ignoreBound: boolean): void {
  const { bound } = q.opts;
  if (!ignoreBound && size(q) >= bound)
    throw new SluiceError(ErrorCode.TOO_MANY, [`queue holds ${bound} runs`]);
  q.lanes[job.kind].pending.push(spaceKey(job.scope), job);
  q.pendingRuns.set(job.runId, (q.pendingRuns.get(job.runId) ?? 0) + 1);
  pump(q, job.kind);
}

function settled(q: LocalQueue, kind: Kind): void {
  q.lanes[kind].active--;
  if (activeCount(q) === 0) for (const f of q.idle.splice(0)) f();
  pump(q, kind);
}

function pump(q: LocalQueue, kind: Kind): void {
  const lane = q.lanes[kind];
  while (
    q.handler &&
    !q.stopped &&
    lane.active < q.opts.concurrency[kind] &&
    lane.pending.size > 0
  ) {
    const job = lane.pending.shift() as RunJob;
    const left = (q.pendingRuns.get(job.runId) ?? 1) - 1;
    if (left > 0) q.pendingRuns.set(job.runId, left);
    else q.pendingRuns.delete(job.runId);
    lane.active++;
    // A handler records its own failures on the run; one that throws must not stall the lane.
    q.handler(job)
      .catch(() => {})
      .finally(() => settled(q, kind));
  }
}

function reserve(q: LocalQueue, kind: Kind): QueueSlot | null {
  const lane = q.lanes[kind];
  if (q.stopped || lane.active >= q.opts.concurrency[kind] || lane.pending.size > 0) return null;
  lane.active++;
  let used = false;
  return {
    run(work) {
      if (used) return;
      used = true;
      work()
        .catch(() => {})
        .finally(() => settled(q, kind));
    },
    release() {
      if (used) return;
      used = true;
      settled(q, kind);
    },
  };
}
