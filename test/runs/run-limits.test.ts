import assert from "node:assert/strict";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { describe, it } from "node:test";
import v8 from "node:v8";
import vm from "node:vm";
import { systemClock } from "../../src/clock.ts";
import { createLocalQueue } from "../../src/queue/local-queue.ts";
import type { RunJob, RunQueue } from "../../src/queue/types.ts";
import { createRunLifecycle, type RunExecutor, type RunRequest } from "../../src/runs/lifecycle.ts";
import { createRunEvents } from "../../src/runs/run-events.ts";
import { createLimitWakeups } from "../../src/runs/run-limits.ts";
import { openStore } from "../../src/store/open-store.ts";
import type { StartableRun } from "../../src/store/types.ts";
import { lifecycleDeps } from "../helpers/lifecycle.ts";
import { newRun } from "../helpers/runs.ts";
import { condition, gate } from "../helpers/wait.ts";

v8.setFlagsFromString("--expose-gc");
const gc = vm.runInNewContext("gc") as () => void;

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

describe("a terminated waiting run (embedded)", () => {
  it("leaves nothing of its request in memory", async () => {
    const store = await openStore({
      dataDir: fs.mkdtempSync(path.join(os.tmpdir(), "sluice-lim-life-")),
    });
    const queue = createLocalQueue({ bound: 100, concurrency: { flow: 4, script: 1 } });
    const events = createRunEvents({ clock: systemClock });
    const release = gate();
    const claimed = condition();
    events.subscribe(() => claimed.changed());
    const executor: RunExecutor<RunRequest> = {
      kind: "flow",
      prepare: async (_req, status) =>
        newRun({ elementId: "5", elementType: "DPL", runLimit: 1, status }),
      execute: async () => {
        await release.promise;
        return { outcome: { status: "SUCCESS", value: 1 } };
      },
    };
    const lifecycle = createRunLifecycle(
      { ...lifecycleDeps({ store, events, queue }), queue },
      executor,
    );
    const handled: string[] = [];
    await queue.start(async (job) => {
      await lifecycle.execute(job.runId);
      handled.push(job.runId);
      claimed.changed();
    });
    try {
      const first = await lifecycle.start({ parameter: null });
      await claimed.readUntil(
        () => store.getRun(null, first),
        (r) => r?.status === "STARTED",
        "the first run holds the slot",
      );
      // The waiting run's parameter, held only by the lifecycle while the run waits.
      const { waiting, held } = await (async () => {
        const parameter = { big: "x".repeat(1024) };
        const id = await lifecycle.start({ parameter });
        return { waiting: id, held: new WeakRef(parameter) };
      })();
      // Its claim found no slot: it waits with no job.
      await claimed.until(() => handled.includes(waiting), "the waiting run's claim");
      const run = await store.getRun(null, waiting);
      assert.equal(run?.status, "QUEUED");
      assert.equal(await lifecycle.terminate(run as NonNullable<typeof run>), true);
      release.open();
      await claimed.readUntil(
        () => store.getRun(null, first),
        (r) => r?.status === "SUCCESS",
        "the first run ends",
      );
      gc();
      await new Promise((r) => setImmediate(r));
      gc();
      assert.equal(held.deref(), undefined, "the terminated run's request is still held");
    } finally {
      release.open();
      await queue.stop();
      await store.close();
    }
  });
});
