import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { startPostgres } from "../helpers/pg.ts";
import { createFakeClock, type FakeClock } from "./fake-clock.ts";
import { type Rig, rig, settle, until } from "./flow-schedules-helpers.ts";

/**
 * Two scheduler processes (two store connections) on one PostgreSQL database, with clocks showing
 * the same time: every tick starts exactly one run between them.
 */
describe("exactly-once firing across a cluster (PostgreSQL)", () => {
  let a: Rig;
  let b: Rig;
  let clockA: FakeClock;
  let clockB: FakeClock;
  before(async () => {
    const url = await (await startPostgres()).createDatabase();
    const start = Date.UTC(2025, 0, 1, 0, 0, 0, 500);
    clockA = createFakeClock(start);
    clockB = createFakeClock(start);
    a = await rig(clockA, { databaseUrl: url });
    b = await rig(clockB, { databaseUrl: url });
  });
  after(async () => {
    await a?.close();
    await b?.close();
  });

  it("two schedulers firing the same ticks start one run per tick", async () => {
    // Deployed and activated through node A; node B learns of it by resync (as from another node).
    const el = await a.deploy("shared", [
      { type: "cron", name: "s", crontab: "* * * * * *", parameter: { n: 1 } },
    ]);
    await a.setStatus(el.id, "APPROVED");
    await b.schedules.resync();
    assert.equal(
      b.schedules.schedules(el.id)[0]?.scheduleId,
      a.schedules.schedules(el.id)[0]?.scheduleId,
    );
    for (let i = 0; i < 20; i++) {
      await Promise.all([clockA.advanceAsync(1000), clockB.advanceAsync(1000)]);
    }
    await until(() => a.starts.length + b.starts.length >= 20);
    await settle();
    assert.equal(
      a.starts.length + b.starts.length,
      20,
      `A ${a.starts.length} + B ${b.starts.length}`,
    );
    assert.equal(
      b.schedules.schedules(el.id)[0]?.lastRunAt,
      a.schedules.schedules(el.id)[0]?.lastRunAt,
    );
  });

  it("concurrent claims of one tick: exactly one wins", async () => {
    const claims = await Promise.all(
      Array.from({ length: 40 }, (_, i) =>
        (i % 2 ? a : b).store.claimScheduleTick("race", 123_000),
      ),
    );
    assert.equal(claims.filter(Boolean).length, 1);
  });

  it("a deactivation through another node stops this node's schedule at its next resync", async () => {
    const el = await a.deploy("stopper", [{ type: "cron", name: "s", crontab: "* * * * * *" }]);
    await a.setStatus(el.id, "APPROVED");
    await b.schedules.resync();
    assert.notEqual(b.schedules.schedules(el.id)[0]?.nextRunAt, undefined);
    await a.setStatus(el.id, "OBSOLETE");
    await b.schedules.resync();
    assert.equal(b.schedules.schedules(el.id)[0]?.nextRunAt, undefined);
  });
});
