import assert from "node:assert/strict";
import { describe, it } from "node:test";
import type { CronTrigger } from "../../src/flows/graph.ts";
import { scheduleIdFor } from "../../src/scheduler/cron-spec.ts";
import {
  createMemoryScheduleState,
  type ScheduleState,
} from "../../src/scheduler/schedule-state.ts";
import { createScheduler, type Schedule, type Scheduler } from "../../src/scheduler/scheduler.ts";
import { createFakeClock, type FakeClock } from "./fake-clock.ts";

const at = (iso: string): number => Date.parse(iso);
const iso = (ms: number): string => new Date(ms).toISOString();
const MIN = 60_000;
const HOUR = 60 * MIN;

const cron = (name: string, crontab: string, timezone?: string): CronTrigger =>
  timezone === undefined
    ? { type: "cron", name, crontab }
    : { type: "cron", name, crontab, timezone };

interface Harness {
  clock: FakeClock;
  scheduler: Scheduler;
  fires: { name: string; elementId: string; tick: string; wall: string }[];
  errors: unknown[];
  store: ScheduleState & { data: Map<string, number> };
}

function harness(
  startIso: string,
  opts: {
    fire?: (s: Schedule, tick: number) => Promise<void>;
    store?: ScheduleState & { data: Map<string, number> };
  } = {},
): Harness {
  const clock = createFakeClock(at(startIso));
  const fires: Harness["fires"] = [];
  const errors: unknown[] = [];
  const store = opts.store ?? createMemoryScheduleState();
  const scheduler = createScheduler({
    clock,
    store,
    logger: { warn: (o) => errors.push(o), error: (o) => errors.push(o) },
    fire: async (s, tick) => {
      fires.push({ name: s.name, elementId: s.elementId, tick: iso(tick), wall: iso(clock.now()) });
      if (opts.fire) await opts.fire(s, tick);
    },
  });
  return { clock, scheduler, fires, errors, store };
}

const ticksOf = (h: Harness): string[] => h.fires.map((f) => f.tick);

describe("scheduler: crontabs and zones", () => {
  it("fires a 5-field crontab at each minute, exactly on the tick", async () => {
    const h = harness("2025-01-01T00:00:30Z");
    h.scheduler.upsertFlow("el1", [{ type: "manual" }, cron("m", "* * * * *")], true);
    await h.scheduler.start();
    h.clock.advance(3 * MIN);
    assert.deepEqual(ticksOf(h), [
      "2025-01-01T00:01:00.000Z",
      "2025-01-01T00:02:00.000Z",
      "2025-01-01T00:03:00.000Z",
    ]);
    assert.deepEqual(
      h.fires.map((f) => f.wall),
      ticksOf(h),
    );
    const [s] = h.scheduler.schedules("el1");
    assert.equal(s?.lastRunAt, at("2025-01-01T00:03:00Z"));
    assert.equal(s?.nextRunAt, at("2025-01-01T00:04:00Z"));
    assert.equal(s?.scheduleId, scheduleIdFor("el1", "m"));
    assert.equal(s?.timezone, "UTC");
    assert.equal(h.store.data.get(scheduleIdFor("el1", "m")), at("2025-01-01T00:03:00Z"));
  });

  it("fires a 6-field crontab with seconds first", async () => {
    const h = harness("2025-01-01T00:00:00.500Z");
    h.scheduler.upsertFlow("el1", [cron("s", "*/2 * * * * *")], true);
    await h.scheduler.start();
    h.clock.advance(10_000);
    assert.deepEqual(
      ticksOf(h),
      [2, 4, 6, 8, 10].map((s) => `2025-01-01T00:00:${String(s).padStart(2, "0")}.000Z`),
    );
  });

  it("0 9 * * * in Europe/Berlin fires at 07:00 UTC in summer and 08:00 UTC in winter", async () => {
    const h = harness("2025-10-24T12:00:00Z");
    h.scheduler.upsertFlow("el1", [cron("b", "0 9 * * *", "Europe/Berlin")], true);
    await h.scheduler.start();
    h.clock.advance(4 * 24 * HOUR); // CEST ends on 2025-10-26
    assert.deepEqual(ticksOf(h), [
      "2025-10-25T07:00:00.000Z",
      "2025-10-26T08:00:00.000Z",
      "2025-10-27T08:00:00.000Z",
      "2025-10-28T08:00:00.000Z",
    ]);
  });

  it("spring forward: 30 2 * * * in America/New_York fires once, at 03:00 EDT", async () => {
    const h = harness("2025-03-08T12:00:00Z");
    h.scheduler.upsertFlow("el1", [cron("ny", "30 2 * * *", "America/New_York")], true);
    await h.scheduler.start();
    h.clock.advance(2 * 24 * HOUR);
    assert.deepEqual(ticksOf(h), ["2025-03-09T07:00:00.000Z", "2025-03-10T06:30:00.000Z"]);
  });

  it("fall back: 30 1 * * * in America/New_York fires once on the repeated hour", async () => {
    const h = harness("2025-11-01T12:00:00Z");
    h.scheduler.upsertFlow("el1", [cron("ny", "30 1 * * *", "America/New_York")], true);
    await h.scheduler.start();
    h.clock.advance(2 * 24 * HOUR);
    assert.deepEqual(ticksOf(h), ["2025-11-02T05:30:00.000Z", "2025-11-03T06:30:00.000Z"]);
  });
});

describe("scheduler: clock jumps and catch-up", () => {
  it("never fires a tick twice when the wall clock jumps back", async () => {
    const h = harness("2025-01-01T00:00:30Z");
    h.scheduler.upsertFlow("el1", [cron("m", "* * * * *")], true);
    await h.scheduler.start();
    h.clock.advance(2 * MIN); // fires 00:01, 00:02; wall 00:02:30
    h.clock.set(at("2025-01-01T00:00:00Z"));
    h.clock.advance(3 * MIN); // wall back at 00:03:00: replays 00:01..00:02 must not fire
    assert.deepEqual(ticksOf(h), [
      "2025-01-01T00:01:00.000Z",
      "2025-01-01T00:02:00.000Z",
      "2025-01-01T00:03:00.000Z",
    ]);
    // While the clock is behind, nextRunAt is the next tick that will actually fire.
    h.clock.set(at("2025-01-01T00:00:10Z"));
    assert.equal(h.scheduler.schedules("el1")[0]?.nextRunAt, at("2025-01-01T00:04:00Z"));
  });

  it("a wall-clock jump forward fires once, for the latest missed tick", async () => {
    const h = harness("2025-01-01T00:00:30Z");
    h.scheduler.upsertFlow("el1", [cron("m", "* * * * *")], true);
    await h.scheduler.start();
    h.clock.advance(MIN); // 00:01
    h.clock.set(at("2025-01-01T03:00:45Z"));
    // The pending timer (30 s left) wakes at wall 03:01:15 and sees 3 hours of missed ticks.
    h.clock.advance(MIN);
    h.clock.advance(MIN);
    assert.deepEqual(ticksOf(h), [
      "2025-01-01T00:01:00.000Z",
      "2025-01-01T03:01:00.000Z",
      "2025-01-01T03:02:00.000Z",
    ]);
  });

  it("after downtime, fires once for the latest missed tick, then continues", async () => {
    const id = scheduleIdFor("el1", "m");
    const store = createMemoryScheduleState([[id, at("2025-01-01T00:05:00Z")]]);
    const h = harness("2025-01-01T02:30:20Z", { store });
    h.scheduler.upsertFlow("el1", [cron("m", "*/10 * * * *"), cron("new", "*/10 * * * *")], true);
    assert.equal(h.scheduler.schedules("el1")[0]?.lastRunAt, undefined, "not loaded before start");
    await h.scheduler.start();
    assert.equal(h.scheduler.schedules("el1")[0]?.lastRunAt, at("2025-01-01T00:05:00Z"));
    h.clock.advance(0);
    assert.deepEqual(h.fires, [
      {
        name: "m",
        elementId: "el1",
        tick: "2025-01-01T02:30:00.000Z",
        wall: "2025-01-01T02:30:20.000Z",
      },
    ]);
    h.clock.advance(10 * MIN);
    // A schedule without a recorded last fire does not catch up; both go on with 02:40.
    assert.deepEqual(ticksOf(h).slice(1), ["2025-01-01T02:40:00.000Z", "2025-01-01T02:40:00.000Z"]);
  });

  it("stop() then start() after a long pause catches up once", async () => {
    const h = harness("2025-01-01T00:00:30Z");
    h.scheduler.upsertFlow("el1", [cron("m", "* * * * *")], true);
    await h.scheduler.start();
    h.clock.advance(MIN);
    h.scheduler.stop();
    assert.equal(h.clock.pending(), 0);
    h.clock.advance(10 * MIN);
    assert.equal(h.fires.length, 1);
    await h.scheduler.start();
    h.clock.advance(MIN);
    assert.deepEqual(ticksOf(h), [
      "2025-01-01T00:01:00.000Z",
      "2025-01-01T00:11:00.000Z",
      "2025-01-01T00:12:00.000Z",
    ]);
  });

  it("a stalled timer (late wake-up) coalesces missed ticks of a seconds schedule", async () => {
    const h = harness("2025-01-01T00:00:00.500Z");
    h.scheduler.upsertFlow("el1", [cron("s", "* * * * * *")], true);
    await h.scheduler.start();
    // Wall time runs 5 s ahead of the timer, as when the event loop was blocked.
    h.clock.set(at("2025-01-01T00:00:05.700Z"));
    h.clock.advance(500);
    assert.deepEqual(ticksOf(h), ["2025-01-01T00:00:06.000Z"]);
  });
});

describe("scheduler: slow fire loop", () => {
  it("a tick that passes while fires run is fired next, not skipped", async () => {
    let h: Harness | undefined;
    let slow = true;
    h = harness("2025-01-01T00:00:00.500Z", {
      fire: () => {
        // The first fire loop takes 1.2 s of wall time (a busy machine).
        if (slow && h) h.clock.set(h.clock.now() + 1_200);
        slow = false;
        return Promise.resolve();
      },
    });
    h.scheduler.upsertFlow("el1", [cron("s", "* * * * * *")], true);
    await h.scheduler.start();
    h.clock.advance(500); // wall 00:00:01 → fire; the loop ends at 00:00:02.2
    assert.deepEqual(ticksOf(h), ["2025-01-01T00:00:01.000Z", "2025-01-01T00:00:02.000Z"]);
    assert.equal(h.fires[1]?.wall, "2025-01-01T00:00:02.200Z");
  });
});

describe("scheduler: deploys and approval", () => {
  it("deactivate stops firing and clears nextRunAt; reactivate resumes from now", async () => {
    const h = harness("2025-01-01T00:00:30Z");
    h.scheduler.upsertFlow("el1", [cron("m", "* * * * *")], true);
    await h.scheduler.start();
    h.clock.advance(MIN);
    h.scheduler.upsertFlow("el1", [cron("m", "* * * * *")], false);
    const [off] = h.scheduler.schedules("el1");
    assert.equal(off?.nextRunAt, undefined);
    assert.equal(off?.lastRunAt, at("2025-01-01T00:01:00Z"));
    assert.equal(h.clock.pending(), 0);
    h.clock.advance(5 * MIN);
    assert.equal(h.fires.length, 1);
    h.scheduler.upsertFlow("el1", [cron("m", "* * * * *")], true); // wall 00:06:30
    assert.equal(h.scheduler.schedules("el1")[0]?.nextRunAt, at("2025-01-01T00:07:00Z"));
    h.clock.advance(MIN);
    assert.deepEqual(ticksOf(h), ["2025-01-01T00:01:00.000Z", "2025-01-01T00:07:00.000Z"]);
  });

  it("redeploy with a changed crontab keeps scheduleId and lastRunAt and takes effect at once", async () => {
    const h = harness("2025-01-01T00:59:30Z");
    h.scheduler.upsertFlow("el1", [cron("a", "0 * * * *"), cron("gone", "* * * * *")], true);
    await h.scheduler.start();
    h.clock.advance(MIN); // wall 01:00:30: a fired at 01:00
    const before = h.scheduler.schedules("el1");
    assert.equal(before.length, 2);
    h.scheduler.upsertFlow(
      "el1",
      [cron("a", "*/5 * * * *", "Europe/Berlin"), cron("b", "*/7 * * * *")],
      true,
    );
    const after = h.scheduler.schedules("el1");
    assert.deepEqual(
      after.map((s) => s.name),
      ["a", "b"],
    );
    assert.equal(after[0]?.scheduleId, before[0]?.scheduleId);
    assert.equal(after[0]?.lastRunAt, at("2025-01-01T01:00:00Z"));
    assert.equal(after[0]?.crontab, "*/5 * * * *");
    assert.equal(after[0]?.nextRunAt, at("2025-01-01T01:05:00Z"));
    assert.equal(after[1]?.nextRunAt, at("2025-01-01T01:07:00Z"));
    assert.equal(h.scheduler.nextSchedule("el1")?.name, "a");
    h.clock.advance(10 * MIN);
    assert.deepEqual(
      h.fires.map((f) => `${f.name}@${f.tick.slice(11, 16)}`),
      ["a@01:00", "gone@01:00", "a@01:05", "b@01:07", "a@01:10"],
    );
  });

  it("an unchanged redeploy keeps the pending tick", async () => {
    const h = harness("2025-01-01T00:00:30Z");
    h.scheduler.upsertFlow("el1", [cron("m", "* * * * *")], true);
    await h.scheduler.start();
    h.clock.advance(29_000);
    h.scheduler.upsertFlow("el1", [cron("m", "* * * * *")], true);
    h.clock.advance(1_000);
    assert.deepEqual(ticksOf(h), ["2025-01-01T00:01:00.000Z"]);
  });

  it("removeFlow drops its schedules; nextSchedule of an unapproved flow is its first trigger", async () => {
    const h = harness("2025-01-01T00:00:30Z");
    h.scheduler.upsertFlow("el1", [cron("x", "0 0 * * *"), cron("y", "* * * * *")], false);
    await h.scheduler.start();
    assert.equal(h.scheduler.nextSchedule("el1")?.name, "x");
    assert.equal(h.scheduler.nextSchedule("el1")?.nextRunAt, undefined);
    h.scheduler.upsertFlow("el1", [cron("x", "0 0 * * *"), cron("y", "* * * * *")], true);
    assert.equal(h.scheduler.nextSchedule("el1")?.name, "y");
    h.scheduler.removeFlow("el1");
    assert.deepEqual(h.scheduler.schedules("el1"), []);
    assert.equal(h.scheduler.nextSchedule("el1"), undefined);
    h.clock.advance(5 * MIN);
    assert.equal(h.fires.length, 0);
  });

  it("nothing fires before start()", () => {
    const h = harness("2025-01-01T00:00:30Z");
    h.scheduler.upsertFlow("el1", [cron("m", "* * * * *")], true);
    h.clock.advance(5 * MIN);
    assert.equal(h.fires.length, 0);
    assert.equal(h.scheduler.schedules("el1")[0]?.nextRunAt, at("2025-01-01T00:06:00Z"));
  });

  it("an invalid crontab or zone is logged, listed without nextRunAt, and never fires", async () => {
    const h = harness("2025-01-01T00:00:30Z");
    h.scheduler.upsertFlow(
      "el1",
      [cron("bad", "* * *"), cron("zone", "* * * * *", "Nowhere/Land")],
      true,
    );
    await h.scheduler.start();
    h.clock.advance(2 * MIN);
    assert.equal(h.fires.length, 0);
    assert.equal(h.errors.length, 2);
    assert.deepEqual(
      h.scheduler.schedules("el1").map((s) => s.nextRunAt),
      [undefined, undefined],
    );
  });

  it("keeps one timer however many schedules there are", async () => {
    const h = harness("2025-01-01T00:00:30Z");
    for (let i = 0; i < 500; i++)
      h.scheduler.upsertFlow(`el${i}`, [cron("m", `${i % 60} * * * *`)], true);
    await h.scheduler.start();
    assert.equal(h.clock.pending(), 1);
    h.clock.advance(HOUR);
    assert.equal(h.fires.length, 500);
    assert.equal(h.clock.pending(), 1);
  });
});

describe("scheduler: fires that change their own flow", () => {
  it("a fire may remove, deactivate or redeploy its flow synchronously", async () => {
    let h: Harness | undefined;
    h = harness("2025-01-01T00:00:30Z", {
      fire: (s) => {
        const sch = h?.scheduler;
        if (s.elementId === "rm") sch?.removeFlow("rm");
        if (s.elementId === "off") sch?.upsertFlow("off", [cron("m", "* * * * *")], false);
        if (s.elementId === "re" && s.crontab === "* * * * *")
          sch?.upsertFlow("re", [cron("m", "*/5 * * * *")], true);
        return Promise.resolve();
      },
    });
    for (const el of ["rm", "off", "re"])
      h.scheduler.upsertFlow(el, [cron("m", "* * * * *")], true);
    await h.scheduler.start();
    h.clock.advance(10 * MIN);
    // Schedules due at the same tick fire in no particular order.
    assert.deepEqual(h.fires.map((f) => `${f.tick.slice(11, 16)} ${f.elementId}`).sort(), [
      "00:01 off",
      "00:01 re",
      "00:01 rm",
      "00:05 re",
      "00:10 re",
    ]);
    assert.deepEqual(h.scheduler.schedules("rm"), []);
    assert.equal(h.scheduler.schedules("off")[0]?.nextRunAt, undefined);
  });
});

describe("scheduler: failures", () => {
  it("logs fire errors (thrown or rejected) and keeps firing", async () => {
    let n = 0;
    const h = harness("2025-01-01T00:00:30Z", {
      fire: () => {
        n++;
        if (n === 1) throw new Error("sync boom");
        if (n === 2) return Promise.reject(new Error("async boom"));
        return Promise.resolve();
      },
    });
    h.scheduler.upsertFlow("el1", [cron("m", "* * * * *")], true);
    await h.scheduler.start();
    await h.clock.advanceAsync(3 * MIN);
    assert.equal(h.fires.length, 3);
    assert.equal(h.errors.length, 2);
    assert.match(String((h.errors[1] as { err: Error }).err), /async boom/);
  });

  it("a store that fails to load or save is logged and does not stop scheduling", async () => {
    const errors: unknown[] = [];
    const clock = createFakeClock(at("2025-01-01T00:00:30Z"));
    let fired = 0;
    const scheduler = createScheduler({
      clock,
      logger: { warn: (o) => errors.push(o), error: (o) => errors.push(o) },
      fire: async () => {
        fired++;
      },
      store: {
        load: () => Promise.reject(new Error("db down")),
        save: () => Promise.reject(new Error("db down")),
      },
    });
    scheduler.upsertFlow("el1", [cron("m", "* * * * *")], true);
    await scheduler.start();
    await clock.advanceAsync(2 * MIN);
    assert.equal(fired, 2);
    assert.equal(errors.length, 3);
  });

  it("a stop() during start()'s load wins", async () => {
    const h = harness("2025-01-01T00:00:30Z");
    h.scheduler.upsertFlow("el1", [cron("m", "* * * * *")], true);
    const started = h.scheduler.start();
    h.scheduler.stop();
    await started;
    h.clock.advance(5 * MIN);
    assert.equal(h.fires.length, 0);
  });
});
