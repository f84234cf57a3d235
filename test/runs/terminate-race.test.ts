import assert from "node:assert/strict";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { describe, it } from "node:test";
import { systemClock } from "../../src/clock.ts";
import { createLocalQueue } from "../../src/queue/local-queue.ts";
import { createRunLifecycle, type RunExecutor, type RunRequest } from "../../src/runs/lifecycle.ts";
import { createRunEvents } from "../../src/runs/run-events.ts";
import { openStore } from "../../src/store/open-store.ts";
import type { Store } from "../../src/store/types.ts";
import { lifecycleDeps } from "../helpers/lifecycle.ts";
import { newRun } from "../helpers/runs.ts";
import { gate, within } from "../helpers/wait.ts";

/**
 * A run terminated while its start is being committed (docs/architecture.md, the lifecycle): the
 * start has moved it to STARTED, the terminate to CANCELED, and the executing side hears of the
 * end before it has begun executing. It used to run to its own end all the same (a cluster test
 * waited 30 s for a terminated script now and then); it is stopped as soon as it executes.
 */
describe("a run terminated while its start commits", () => {
  it("is stopped as soon as it executes, not run to its end", async () => {
    const opened = await openStore({
      dataDir: fs.mkdtempSync(path.join(os.tmpdir(), "sluice-terminate-race-")),
    });
    // The start commits, then waits here while the test terminates the run.
    const started = gate();
    const resume = gate();
    const store: Store = {
      ...opened,
      async startRun(id, startTime, nodeId) {
        const r = await opened.startRun(id, startTime, nodeId);
        started.open();
        await resume.promise;
        return r;
      },
    };
    const queue = createLocalQueue({ bound: 100, concurrency: { flow: 1, script: 1 } });
    const stopped = gate();
    const executor: RunExecutor<RunRequest> = {
      kind: "flow",
      prepare: async (_req, status) => newRun({ elementId: "5", elementType: "DPL", status }),
      // Runs until its signal stops it.
      execute: (_rec, _p, signal) =>
        new Promise((resolve) => {
          const stop = () => {
            stopped.open();
            resolve({ outcome: { status: "CANCELED", error: "stopped" } });
          };
          if (signal.aborted) stop();
          else signal.addEventListener("abort", stop);
        }),
    };
    const lifecycle = createRunLifecycle(
      lifecycleDeps({ store, events: createRunEvents({ clock: systemClock }), queue }),
      executor,
    );
    await queue.start((job) => lifecycle.execute(job.runId));
    try {
      const id = await lifecycle.start({ parameter: null });
      await started.promise;
      const run = await opened.getRun(null, id);
      assert.equal(run?.status, "STARTED");
      assert.equal(await lifecycle.terminate(run as NonNullable<typeof run>), true);
      resume.open();
      await within(stopped.promise, 10_000, "the terminated run stopped");
      assert.equal((await opened.getRun(null, id))?.status, "CANCELED");
    } finally {
      resume.open();
      // A run still executing would hold the queue's stop for good: only a stopped one is awaited.
      if (await Promise.race([stopped.promise.then(() => true), Promise.resolve(false)]))
        await queue.stop();
      await opened.close();
    }
  });
});
