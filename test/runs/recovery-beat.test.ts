import assert from "node:assert/strict";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { after, before, describe, it } from "node:test";
import pino from "pino";
import { systemClock } from "../../src/clock.ts";
import type { RunQueue } from "../../src/queue/types.ts";
import { createEndedElsewhere } from "../../src/runs/ended-elsewhere.ts";
import { createRunsHere } from "../../src/runs/orphans.ts";
import { createRecovery } from "../../src/runs/recovery.ts";
import { createRunEvents } from "../../src/runs/run-events.ts";
import { type OpenedStore, openStore } from "../../src/store/open-store.ts";
import { newRun } from "../helpers/runs.ts";

/**
 * docs/cluster.md, "Ends a node did not hear": the look for ended runs held here is one step of a
 * beat. A failure of it (its statement refused, timed out) is logged; the beat's other steps
 * still run: the runs of dead nodes are failed, waiting runs woken.
 */
describe("a beat whose look for ended runs fails", () => {
  let store: OpenedStore;
  let dataDir: string;

  before(async () => {
    dataDir = fs.mkdtempSync(path.join(os.tmpdir(), "sluice-recovery-beat-"));
    store = await openStore({ dataDir });
  });

  after(async () => {
    await store?.close();
    fs.rmSync(dataDir, { recursive: true, force: true });
  });

  it("still fails the runs of dead nodes and wakes the waiting runs", async () => {
    const lost = newRun({ status: "STARTED", startTime: Date.now(), nodeId: "a-dead-node" });
    await store.insertRun(lost);
    const here = createRunsHere();
    here.hold("a-run-held-here");
    const errors: unknown[] = [];
    const logger = pino({ level: "silent" });
    logger.error = ((obj: unknown) => {
      errors.push(obj);
    }) as typeof logger.error;
    let woken = 0;
    const recovery = createRecovery({
      store,
      queue: {} as RunQueue,
      events: createRunEvents({ clock: systemClock }),
      clock: systemClock,
      logger,
      nodeId: "this-node",
      sharedDatabase: true,
      heartbeatMs: 100,
      heartbeatTimeoutMs: 300,
      requeue: false,
      waiting: {
        async sweep() {
          woken++;
          return 0;
        },
      },
      endedElsewhere: createEndedElsewhere({
        store: {
          endedAmong: async () => {
            throw new Error("canceling statement due to statement timeout");
          },
        },
        events: createRunEvents({ clock: systemClock }),
        here,
        logger,
      }),
    });
    const swept = await recovery.sweep();
    assert.equal(swept.failed, 1);
    assert.equal((await store.getRun(null, lost.id))?.status, "FAILURE");
    assert.equal(woken, 1);
    assert.equal(errors.length, 1, "the failed look is logged");
  });
});
