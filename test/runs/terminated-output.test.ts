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
import { lifecycleDeps } from "../helpers/lifecycle.ts";
import { newRun } from "../helpers/runs.ts";
import { gate, within } from "../helpers/wait.ts";

/**
 * A run terminated through another node whose end this node never heard before its task ended by
 * itself (docs/script-service.md): the record is CANCELED, the executor's end SUCCESS and lost.
 * What the task printed is still added to the CANCELED record, as for a task the terminate killed.
 */
describe("a terminated run whose task ended by itself first", () => {
  it("keeps what it printed on its CANCELED record", async () => {
    const store = await openStore({
      dataDir: fs.mkdtempSync(path.join(os.tmpdir(), "sluice-terminated-output-")),
    });
    const events = createRunEvents({ clock: systemClock });
    const executing = gate();
    const finish = gate();
    const executor: RunExecutor<RunRequest> = {
      kind: "script",
      prepare: async (_req, status) => newRun({ elementId: "5", elementType: "PY", status }),
      execute: async () => {
        executing.open();
        await finish.promise;
        return { outcome: { status: "SUCCESS", value: 1, stdout: "got to row 40\n", stderr: "" } };
      },
    };
    const queue = createLocalQueue({ bound: 10, concurrency: { flow: 1, script: 1 } });
    const lifecycle = createRunLifecycle(
      lifecycleDeps({ store, events, queue, queuedRuns: 10 }),
      executor,
    );
    await queue.start((job) => lifecycle.execute(job.runId));
    try {
      const id = await lifecycle.start({ parameter: null });
      await within(executing.promise, 10_000, "the task to execute");
      // The terminate another node recorded; its notification never came here.
      const cut = { status: "CANCELED" as const, endTime: Date.now(), summary: "terminated" };
      assert.equal(await store.endRun(id, { ...cut, error: "terminated by request" }), true);
      const ended = new Promise<void>((resolve) =>
        events.onEnd((runId) => runId === id && resolve()),
      );
      finish.open();
      await within(ended, 10_000, "the run's end to be handled here");
      const run = await store.getRun(null, id);
      assert.deepEqual([run?.status, run?.stdout], ["CANCELED", "got to row 40\n"]);
    } finally {
      finish.open();
      await queue.stop();
      await store.close();
    }
  });
});
