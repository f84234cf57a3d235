import { ErrorCode, SluiceError } from "../errors.ts";
import { stopping } from "./stopping.ts";
import type { RunJob, RunQueue } from "./types.ts";

type Kind = RunJob["kind"];

/**
 * The embedded-mode queue: one in-memory FIFO per kind, each behind its own concurrency bound
 * (script slots are scarce processes; flow slots mostly wait). Durability comes from the store:
 * jobs are runs already committed as QUEUED, and restart recovery re-enqueues them.
 */
export function createLocalQueue(opts: {
  bound: number;
  concurrency: Record<Kind, number>;
}): RunQueue {
  const lanes = {
    flow: { pending: [] as RunJob[], head: 0, active: 0 },
    script: { pending: [] as RunJob[], head: 0, active: 0 },
  };
  let handler: ((job: RunJob) => Promise<void>) | null = null;
  let stopped = false;
  const idle: (() => void)[] = [];

  const size = () =>
    lanes.flow.pending.length - lanes.flow.head + lanes.script.pending.length - lanes.script.head;
  const activeCount = () => lanes.flow.active + lanes.script.active;

  function settled(kind: Kind): void {
    lanes[kind].active--;
    if (activeCount() === 0) for (const f of idle.splice(0)) f();
    pump(kind);
  }

  function pump(kind: Kind): void {
    const lane = lanes[kind];
    while (
      handler &&
      !stopped &&
      lane.active < opts.concurrency[kind] &&
      lane.head < lane.pending.length
    ) {
      const job = lane.pending[lane.head++] as RunJob;
      if (lane.head > 1024 && lane.head * 2 > lane.pending.length) {
        lane.pending.splice(0, lane.head);
        lane.head = 0;
      }
      lane.active++;
      // A handler records its own failures on the run; one that throws must not stall the lane.
      handler(job)
        .catch(() => {})
        .finally(() => settled(kind));
    }
  }

  return {
    async enqueue(job, enqueueOpts) {
      if (!enqueueOpts?.ignoreBound && size() >= opts.bound)
        throw new SluiceError(ErrorCode.TOO_MANY, [`queue holds ${opts.bound} runs`]);
      lanes[job.kind].pending.push(job);
      pump(job.kind);
    },
    async submit(run, job, store) {
      if (stopped) throw stopping();
      await store.insertRun(run);
      await this.enqueue(job, { ignoreBound: true });
    },
    async start(h) {
      handler = h;
      pump("flow");
      pump("script");
    },
    depth: size,
    reserve(kind) {
      const lane = lanes[kind];
      if (stopped || lane.active >= opts.concurrency[kind] || lane.head < lane.pending.length)
        return null;
      lane.active++;
      let used = false;
      return {
        run(work) {
          if (used) return;
          used = true;
          work()
            .catch(() => {})
            .finally(() => settled(kind));
        },
        release() {
          if (used) return;
          used = true;
          settled(kind);
        },
      };
    },
    async stop() {
      stopped = true;
      if (activeCount() > 0) await new Promise<void>((r) => idle.push(r));
    },
  };
}
