import { ErrorCode, SluiceError } from "../errors.ts";
import type { RunJob, RunQueue } from "./types.ts";

/**
 * The embedded-mode queue: an in-memory FIFO in front of a concurrency bound. Durability comes
 * from the store (jobs are runs already committed as QUEUED; restart recovery re-enqueues them).
 */
export function createLocalQueue(opts: { bound: number; concurrency: number }): RunQueue {
  const pending: RunJob[] = [];
  let head = 0;
  let active = 0;
  let handler: ((job: RunJob) => Promise<void>) | null = null;
  let stopped = false;
  const idle: (() => void)[] = [];

  const size = () => pending.length - head;

  function pump(): void {
    while (handler && !stopped && active < opts.concurrency && size() > 0) {
      const job = pending[head++] as RunJob;
      if (head > 1024 && head * 2 > pending.length) {
        pending.splice(0, head);
        head = 0;
      }
      active++;
      const run = handler;
      // A handler records its own failures on the run; one that throws must not stall the queue.
      run(job)
        .catch(() => {})
        .finally(() => {
          active--;
          if (active === 0) for (const f of idle.splice(0)) f();
          pump();
        });
    }
  }

  return {
    async enqueue(job) {
      if (size() >= opts.bound) throw new SluiceError(ErrorCode.TOO_MANY, [`queue holds ${opts.bound} runs`]);
      pending.push(job);
      queueMicrotask(pump);
    },
    async start(h) {
      handler = h;
      pump();
    },
    depth: size,
    async stop() {
      stopped = true;
      if (active > 0) await new Promise<void>((r) => idle.push(r));
    },
  };
}
