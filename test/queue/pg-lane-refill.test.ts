import assert from "node:assert/strict";
import os from "node:os";
import { after, before, describe, it } from "node:test";
import type { Clock, TimerHandle } from "../../src/clock.ts";
import { createPgQueue } from "../../src/queue/pg-queue.ts";
import { type OpenedStore, openStore } from "../../src/store/open-store.ts";
import { startPostgres } from "../helpers/pg.ts";
import { newRun } from "../helpers/runs.ts";
import { condition, gate } from "../helpers/wait.ts";

const logger = { info: () => {}, warn: () => {}, error: () => {} };

/** A clock that moves only when the test fires one of its timers (to that timer's time). */
function stillClock() {
  let now = Date.now();
  const timers: { ms: number; fn: () => void; cleared: boolean }[] = [];
  const armed = condition();
  const clock: Clock = {
    now: () => now,
    setTimeout(fn, ms) {
      const t = { ms, fn, cleared: false };
      timers.push(t);
      armed.changed();
      return t as unknown as TimerHandle;
    },
    clearTimeout: (h) => {
      (h as unknown as { cleared: boolean }).cleared = true;
    },
  };
  const fire = (t: { ms: number; fn: () => void }) => {
    now += t.ms;
    t.fn();
  };
  return { clock, timers, armed, fire };
}

/**
 * A busy lane refills in batches (docs/cluster.md, "Waking the lanes"): with most of its slots
 * taken, one freed slot is not a fetch of its own (before, a script lane fetched and started one
 * or two jobs per statement under load); a quarter of its slots free is, and so is the nudge.
 */
describe("a busy cluster lane refills its slots in batches", () => {
  let url = "";
  let store: OpenedStore;
  before(async () => {
    url = await (await startPostgres()).createDatabase();
    store = await openStore({ databaseUrl: url, dataDir: os.tmpdir() });
  });
  after(async () => {
    await store.close();
  });

  it("one slot of eight freed waits for a second or the nudge; two are fetched together", async () => {
    const { clock, timers, armed, fire } = stillClock();
    const lane = await createPgQueue({
      connectionString: url,
      bound: 10_000,
      logger,
      queueName: "refill",
      concurrency: 8,
      pollMs: 600_000,
      clock,
    });
    const holds = new Map<string, ReturnType<typeof gate>>();
    const seen: string[] = [];
    const delivered = condition();
    const ids: string[] = [];
    try {
      for (let i = 0; i < 12; i++) {
        const run = newRun({ elementType: "DPL", scope: { app: "a", space: "s" } });
        await lane.submit(run, { runId: run.id, kind: "flow", scope: run.scope }, store);
        ids.push(run.id);
      }
      await lane.start(async (j) => {
        const g = gate();
        holds.set(j.runId, g);
        seen.push(j.runId);
        delivered.changed();
        await g.promise;
      });
      await delivered.until(() => seen.length === 8, "the first eight delivered");
      const release = (n: number) => holds.get(seen[n] as string)?.open();

      // The job's end arms the completion flush, then the lane goes back to sleep: on the nudge
      // (50 ms from its last fetch), not after a fetch of its own (its full slots' long wait).
      const before = timers.length;
      release(0);
      await armed.until(() => timers.length >= before + 2, "the lane asleep again");
      assert.equal(seen.length, 8, "no fetch for a single freed slot");
      assert.ok(timers.at(-1)?.ms === 50, `asleep on the nudge, not ${timers.at(-1)?.ms} ms`);

      // A second slot freed: a quarter of the eight, fetched at once, both in one fetch.
      release(1);
      await delivered.until(() => seen.length === 10, "two more delivered");

      // One freed slot alone is still refilled, when the nudge fires.
      const asleep = timers.length;
      release(2);
      await armed.until(() => timers.length >= asleep + 1, "asleep on the nudge");
      const nudge = timers.findLast((t) => t.ms === 50 && !t.cleared);
      assert.ok(nudge, "a nudge armed");
      fire(nudge);
      await delivered.until(() => seen.length === 11, "the nudge refilled the slot");
    } finally {
      for (const g of holds.values()) g.open();
      for (const id of ids) holds.get(id)?.open();
      await lane.stop();
    }
  });
});
