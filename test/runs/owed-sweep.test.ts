import assert from "node:assert/strict";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { after, before, describe, it } from "node:test";
import { systemClock } from "../../src/clock.ts";
import { createOwedSweep, type OwedSweepConfig } from "../../src/runs/error-handlers/recover.ts";
import { createNoticeStore, type NoticeStore } from "../../src/store/kysely-notices.ts";
import { type OpenedStore, openStore } from "../../src/store/open-store.ts";
import { newRun } from "../helpers/runs.ts";
import { condition } from "../helpers/wait.ts";

/**
 * The sweep that takes over owed error-handler notifications (docs/error-handlers.md, "Durable"),
 * over a real store and handlers that only count what they are given.
 */

const HOUR = 3_600_000;
/** What service-subscribers.ts passes in embedded mode: every other holder, at start. */
const EMBEDDED: OwedSweepConfig = {
  takeAll: true,
  heartbeatTimeoutMs: 1500,
  windowMs: 24 * HOUR,
  everyMs: 0,
};

describe("owed notifications sweep", () => {
  let store: OpenedStore;
  let notices: NoticeStore;
  let dataDir: string;
  before(async () => {
    dataDir = fs.mkdtempSync(path.join(os.tmpdir(), "sluice-owed-sweep-"));
    store = await openStore({ dataDir });
    notices = createNoticeStore(store.db, "sqlite");
  });
  after(async () => {
    await store?.close();
    fs.rmSync(dataDir, { recursive: true, force: true });
  });

  /** `n` FAILUREs owing notifications, held by `holder`. */
  async function owed(n: number, holder: string): Promise<string[]> {
    const ids: string[] = [];
    for (let i = 0; i < n; i++) {
      const r = newRun({ elementType: "DPL", status: "STARTED", startTime: Date.now() });
      const at = Date.now();
      await store.insertRun(r, {
        status: "FAILURE",
        endTime: at,
        summary: "boom",
        error: "boom",
        notifyBy: holder,
      });
      ids.push(r.id);
    }
    return ids;
  }

  /** Handlers that resend on a later turn and clear the mark, as the real ones do. */
  function counting(ownUnderWay = 0) {
    const resent = new Set<string>();
    const cond = condition();
    let underWay = 0;
    return {
      resent,
      cond,
      handlers: {
        pending: () => ownUnderWay + underWay,
        givenUp: () => [],
        forget() {},
        async resend(runId: string, holder: string) {
          underWay++;
          await new Promise((r) => setImmediate(r));
          resent.add(runId);
          await notices.clear(runId, holder);
          underWay--;
          cond.changed();
        },
      },
    };
  }

  const logger = { warn() {}, error() {} };

  it("embedded: more owed runs than one batch are all sent by the start, not only the first 100", async () => {
    const ids = await owed(250, "previous-life-1");
    const h = counting();
    const sweep = createOwedSweep({
      notices,
      handlers: h.handlers,
      clock: systemClock,
      logger,
      nodeId: "now-1",
      config: EMBEDDED,
    });
    await sweep.start();
    try {
      await h.cond.until(() => ids.every((id) => h.resent.has(id)), "every owed run resent", 5000);
    } catch (err) {
      assert.fail(`${(err as Error).message}: ${h.resent.size} of ${ids.length}`);
    } finally {
      await sweep.stop();
    }
  });

  it("a node busy with its own notifications (runs recovery failed at start) still takes what a dead life owed", async () => {
    const ids = await owed(3, "previous-life-2");
    // 150 notifications of this node's own FAILUREs under way (a receiver that never answers).
    const h = counting(150);
    const sweep = createOwedSweep({
      notices,
      handlers: h.handlers,
      clock: systemClock,
      logger,
      nodeId: "now-2",
      config: EMBEDDED,
    });
    await sweep.start();
    try {
      await h.cond.until(() => ids.every((id) => h.resent.has(id)), "every owed run resent", 5000);
    } catch (err) {
      assert.fail(`${(err as Error).message}: ${h.resent.size} of ${ids.length}`);
    } finally {
      await sweep.stop();
    }
  });
});
