import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { systemClock } from "../../src/clock.ts";
import { createLocalQueue } from "../../src/queue/local-queue.ts";
import type { RunJob, RunQueue } from "../../src/queue/types.ts";
import { createRunEvents } from "../../src/runs/run-events.ts";
import { createLimitWakeups } from "../../src/runs/run-limits.ts";
import type { StartableRun } from "../../src/store/types.ts";
import { newRun } from "../helpers/runs.ts";
import { gate } from "../helpers/wait.ts";

const scope = { app: "a", space: "s" };
const startable = (id: string): StartableRun => ({ id, elementType: "DPL", scope });
const quiet = { error() {}, warn() {} };

/**
 * Wake-ups of waiting limited runs (docs/run-limits.md): a run that fits a free slot while its job
 * still waits in the queue (the lane is busy) is not given a second job, neither by the beat's
 * sweep nor by the end of another run of its element. Each extra job is a claim transaction and a
 * place counted against LIMIT_QUEUED_RUNS.
 */
describe("limit wake-ups", () => {
  it("a run whose job still waits gets no second job from the sweep", async () => {
    // Never started: the jobs stay queued, as behind a busy lane.
    const queue = createLocalQueue({ bound: 100, concurrency: { flow: 1, script: 1 } });
    const wakeups = createLimitWakeups({
      store: { startableRuns: async () => [startable("r1"), startable("r2")] },
      queue,
      events: createRunEvents({ clock: systemClock }),
      logger: quiet,
      heartbeatTimeoutMs: 30_000,
    });
    assert.equal(await wakeups.sweep(), 2);
    assert.equal(await wakeups.sweep(), 0);
    assert.equal(await wakeups.sweep(), 0);
    assert.equal(queue.depth(), 2);
  });

  it("an end wakes only the startable runs that have no job on its way", async () => {
    const local = createLocalQueue({ bound: 100, concurrency: { flow: 1, script: 1 } });
    await local.enqueue({ runId: "r1", kind: "flow", scope });
    const last = gate();
    const queue: RunQueue = {
      ...local,
      async enqueue(job: RunJob, opts) {
        await local.enqueue(job, opts);
        if (job.runId === "r2") last.open();
      },
    };
    if (local.liveJobs) queue.liveJobs = local.liveJobs;
    const events = createRunEvents({ clock: systemClock });
    createLimitWakeups({
      store: { startableRuns: async () => [startable("r1"), startable("r2")] },
      queue,
      events,
      logger: quiet,
      heartbeatTimeoutMs: 30_000,
    });
    events.publish({
      type: "ended",
      runId: "r0",
      end: { status: "SUCCESS", endTime: 1, summary: null },
      run: newRun({ id: "r0", elementId: "7", runLimit: 2 }),
    });
    // r2 is woken after r1 is looked at (oldest first).
    await last.promise;
    assert.equal(local.depth(), 2);
  });
});
