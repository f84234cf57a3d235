import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { scheduleIdFor } from "../../src/scheduler/cron-spec.ts";
import { createFakeClock, type FakeClock } from "./fake-clock.ts";
import { type Rig, rig, settle, until } from "./flow-schedules-helpers.ts";

const MIN = 60_000;

describe("flow schedules (fake clock, SQLite)", () => {
  let clock: FakeClock;
  let r: Rig;
  before(async () => {
    clock = createFakeClock(Date.UTC(2025, 0, 1, 0, 0, 0));
    r = await rig(clock);
  });
  after(() => r.close());

  it("fires only while APPROVED, with trigger SCHEDULED and the trigger's parameter", async () => {
    const el = await r.deploy("every-minute", [
      { type: "cron", name: "m", crontab: "* * * * *", parameter: { k: 1 } },
    ]);
    await clock.advanceAsync(2 * MIN);
    await settle();
    assert.equal(r.starts.length, 0, "DRAFT never fires");
    assert.equal(r.schedules.schedules(el.id)[0]?.nextRunAt, undefined);

    await r.setStatus(el.id, "APPROVED");
    await clock.advanceAsync(MIN);
    await until(() => r.starts.length === 1);
    const s = r.starts[0];
    assert.deepEqual(
      {
        trigger: s?.trigger,
        parameter: s?.parameter,
        inProcess: s?.inProcess,
        user: s?.user,
        elementId: s?.locator.elementId,
      },
      { trigger: "SCHEDULED", parameter: { k: 1 }, inProcess: false, user: null, elementId: el.id },
    );
    const [sched] = r.schedules.schedules(el.id);
    assert.equal(sched?.scheduleId, scheduleIdFor(el.id, "m"));
    assert.equal(sched?.lastRunAt, Date.UTC(2025, 0, 1, 0, 3));
    assert.equal(
      (await r.store.loadScheduleState()).get(sched?.scheduleId ?? ""),
      sched?.lastRunAt,
      "lastRunAt persisted",
    );

    await r.setStatus(el.id, "OBSOLETE");
    await clock.advanceAsync(3 * MIN);
    await settle();
    assert.equal(r.starts.length, 1, "deactivated: no more fires");
    r.starts.length = 0;
  });

  it("6 fields fire every second; a redeploy changes the crontab at once and keeps scheduleId", async () => {
    const el = await r.deploy("secs", [{ type: "cron", name: "t", crontab: "*/2 * * * * *" }]);
    await r.setStatus(el.id, "APPROVED");
    const id = r.schedules.schedules(el.id)[0]?.scheduleId;
    await clock.advanceAsync(10_000);
    await until(() => r.starts.length === 5);
    await r.deploy("secs", [{ type: "cron", name: "t", crontab: "0 0 12 * * *" }]);
    const after = r.schedules.schedules(el.id)[0];
    assert.equal(after?.scheduleId, id, "same trigger name: same scheduleId");
    assert.equal(after?.crontab, "0 0 12 * * *");
    await clock.advanceAsync(10_000);
    await settle();
    assert.equal(r.starts.length, 5, "the old every-2s crontab no longer fires");
    await r.setStatus(el.id, "OBSOLETE");
    r.starts.length = 0;
  });

  it("follows DST in the trigger's zone (Europe/Berlin 09:00 = 08:00 UTC in winter, 07:00 in summer)", async () => {
    clock.set(Date.UTC(2025, 0, 10, 12, 0));
    const el = await r.deploy("berlin", [
      { type: "cron", name: "nine", crontab: "0 9 * * *", timezone: "Europe/Berlin" },
    ]);
    await r.setStatus(el.id, "APPROVED");
    assert.equal(
      r.schedules.nextSchedule(el.id)?.nextRunAt,
      Date.UTC(2025, 0, 11, 8, 0),
      "winter: CET",
    );
    await r.setStatus(el.id, "OBSOLETE");
    clock.set(Date.UTC(2025, 2, 29, 12, 0)); // the day before the spring-forward switch
    await r.setStatus(el.id, "APPROVED");
    assert.equal(r.schedules.nextSchedule(el.id)?.nextRunAt, Date.UTC(2025, 2, 30, 7, 0));
    await clock.advanceAsync(Date.UTC(2025, 2, 30, 7, 0) - clock.now());
    await until(() => r.starts.length === 1);
    assert.equal(r.schedules.schedules(el.id)[0]?.lastRunAt, Date.UTC(2025, 2, 30, 7, 0));
    await r.setStatus(el.id, "OBSOLETE");
    r.starts.length = 0;
  });

  it("a wall clock stepped back never fires a tick twice", async () => {
    clock.set(Date.UTC(2025, 5, 1, 10, 0, 30));
    const el = await r.deploy("jump", [{ type: "cron", name: "m", crontab: "* * * * *" }]);
    await r.setStatus(el.id, "APPROVED");
    await clock.advanceAsync(MIN); // fires 10:01
    await until(() => r.starts.length === 1);
    clock.set(Date.UTC(2025, 5, 1, 9, 58, 30)); // NTP step back 2.5 min
    await clock.advanceAsync(3 * MIN); // wall 10:01:30 again: 09:59, 10:00, 10:01 are not re-fired
    await settle();
    assert.equal(r.starts.length, 1);
    await clock.advanceAsync(MIN); // 10:02 is new
    await until(() => r.starts.length === 2);
    await r.setStatus(el.id, "OBSOLETE");
    r.starts.length = 0;
  });

  it("the database claim refuses a tick already fired (another node, or a restart replay)", async () => {
    assert.equal(await r.store.claimScheduleTick("x", 1000), true);
    assert.equal(await r.store.claimScheduleTick("x", 1000), false);
    assert.equal(await r.store.claimScheduleTick("x", 2000), true);
    assert.equal(await r.store.claimScheduleTick("x", 1500), true, "ticks are claimed one by one");
    assert.equal(
      (await r.store.loadScheduleState()).get("x"),
      2000,
      "lastRunAt only moves forward",
    );
    assert.equal(await r.store.pruneScheduleFires(1600), 2);
    assert.equal(await r.store.claimScheduleTick("x", 2000), false);
  });
});

describe("flow schedules across a restart", () => {
  it("catches up once after downtime, from the persisted lastRunAt", async () => {
    const fs = await import("node:fs");
    const os = await import("node:os");
    const path = await import("node:path");
    const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), "sluice-sched-"));
    const clock = createFakeClock(Date.UTC(2025, 0, 1, 0, 0, 30));
    const first = await rig(clock, { dataDir });
    const el = await first.deploy("hourly", [{ type: "cron", name: "h", crontab: "0 * * * *" }]);
    await first.setStatus(el.id, "APPROVED");
    await clock.advanceAsync(60 * MIN);
    await until(() => first.starts.length === 1);
    await first.close();

    clock.set(Date.UTC(2025, 0, 1, 5, 30)); // down for 4.5 hours: 4 missed ticks
    const second = await rig(clock, { dataDir });
    await clock.advanceAsync(0); // the catch-up timer is due at once
    await until(() => second.starts.length === 1);
    await settle();
    assert.equal(second.starts.length, 1, "one catch-up fire, not a burst");
    assert.equal(second.schedules.schedules(el.id)[0]?.lastRunAt, Date.UTC(2025, 0, 1, 5, 0));
    await second.close();
    fs.rmSync(dataDir, { recursive: true, force: true });
  });
});
