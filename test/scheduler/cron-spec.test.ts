import assert from "node:assert/strict";
import { describe, it } from "node:test";
import {
  CronSpecError,
  createSpecCache,
  cronSpecError,
  nextTick,
  parseCronSpec,
  previousTick,
  scheduleIdFor,
} from "../../src/scheduler/cron-spec.ts";

const at = (iso: string): number => Date.parse(iso);
const iso = (ms: number | null): string | null => (ms === null ? null : new Date(ms).toISOString());

/** The first `n` ticks after `fromIso`. */
function ticks(crontab: string, timezone: string, fromIso: string, n: number): (string | null)[] {
  const spec = parseCronSpec(crontab, timezone);
  const out: (string | null)[] = [];
  let t: number | null = at(fromIso);
  for (let i = 0; i < n && t !== null; i++) {
    t = nextTick(spec, t);
    out.push(iso(t));
  }
  return out;
}

describe("parseCronSpec", () => {
  it("accepts 5 fields and 6 with seconds first, defaulting to UTC", () => {
    const five = parseCronSpec("*/15 * * * *");
    assert.equal(five.timezone, "UTC");
    assert.deepEqual(ticks("*/15 * * * *", "UTC", "2025-01-01T00:07:00Z", 2), [
      "2025-01-01T00:15:00.000Z",
      "2025-01-01T00:30:00.000Z",
    ]);
    assert.deepEqual(ticks("*/2 * * * * *", "UTC", "2025-01-01T00:00:00.500Z", 3), [
      "2025-01-01T00:00:02.000Z",
      "2025-01-01T00:00:04.000Z",
      "2025-01-01T00:00:06.000Z",
    ]);
  });

  it("normalizes whitespace so equal schedules share a key", () => {
    assert.equal(parseCronSpec("  0  9 * * * ", "UTC").key, parseCronSpec("0 9 * * *", "UTC").key);
  });

  it("rejects wrong field counts, bad fields and unknown zones", () => {
    assert.throws(() => parseCronSpec("* * * *"), CronSpecError);
    assert.throws(() => parseCronSpec("0 0 * * * * 2030"), /5 fields, or 6/);
    assert.throws(() => parseCronSpec(""), /got 0/);
    assert.throws(() => parseCronSpec("61 * * * *"), CronSpecError);
    assert.throws(() => parseCronSpec("* * * * *", "Mars/Olympus"), /unknown time zone/);
    assert.equal(cronSpecError("0 9 * * 1-5", "Europe/Berlin"), null);
    assert.match(cronSpecError("nope * * * *") ?? "", /./);
  });
});

describe("nextTick in time zones", () => {
  it("0 9 * * * in Europe/Berlin is 07:00 UTC in summer (CEST) and 08:00 UTC in winter (CET)", () => {
    assert.deepEqual(ticks("0 9 * * *", "Europe/Berlin", "2025-07-01T00:00:00Z", 1), [
      "2025-07-01T07:00:00.000Z",
    ]);
    assert.deepEqual(ticks("0 9 * * *", "Europe/Berlin", "2025-01-15T00:00:00Z", 1), [
      "2025-01-15T08:00:00.000Z",
    ]);
  });

  it("spring forward: 30 2 * * * in America/New_York runs once on 2025-03-09, at 03:00 EDT", () => {
    // 02:00 EST jumps to 03:00 EDT, so 02:30 does not exist; croner runs a fixed-time job at the
    // first valid time after the gap instead of skipping the day.
    assert.deepEqual(ticks("30 2 * * *", "America/New_York", "2025-03-08T00:00:00Z", 3), [
      "2025-03-08T07:30:00.000Z", // 02:30 EST
      "2025-03-09T07:00:00.000Z", // 03:00 EDT
      "2025-03-10T06:30:00.000Z", // 02:30 EDT
    ]);
  });

  it("fall back: 30 1 * * * in America/New_York runs once on 2025-11-02 (first 01:30)", () => {
    assert.deepEqual(ticks("30 1 * * *", "America/New_York", "2025-11-01T12:00:00Z", 2), [
      "2025-11-02T05:30:00.000Z", // 01:30 EDT; 01:30 EST (06:30Z) does not fire again
      "2025-11-03T06:30:00.000Z",
    ]);
  });

  it("fall back: an interval job (*/30 1 * * *) runs in both 01:00-02:00 hours", () => {
    assert.deepEqual(ticks("*/30 1 * * *", "America/New_York", "2025-11-02T04:00:00Z", 5), [
      "2025-11-02T05:00:00.000Z",
      "2025-11-02T05:30:00.000Z",
      "2025-11-02T06:00:00.000Z",
      "2025-11-02T06:30:00.000Z",
      "2025-11-03T06:00:00.000Z",
    ]);
  });

  it("previousTick is the last tick strictly before", () => {
    const spec = parseCronSpec("*/5 * * * *", "UTC");
    assert.equal(iso(previousTick(spec, at("2025-01-01T00:12:00Z"))), "2025-01-01T00:10:00.000Z");
    assert.equal(iso(previousTick(spec, at("2025-01-01T00:10:00Z"))), "2025-01-01T00:05:00.000Z");
  });

  it("memoizes the last query without changing answers", () => {
    const spec = parseCronSpec("* * * * *", "UTC");
    const a = nextTick(spec, at("2025-01-01T00:00:00Z"));
    const b = nextTick(spec, at("2025-01-01T00:00:00Z"));
    const c = nextTick(spec, at("2025-01-01T00:05:00Z"));
    assert.equal(a, b);
    assert.equal(iso(c), "2025-01-01T00:06:00.000Z");
  });
});

describe("shared year table", () => {
  it("distinct specs share croner's all-years table instead of 80 KB each", () => {
    type Internals = { _states: { pattern: { year: number[] } } };
    const a = parseCronSpec("0-5,6-59 * * * * *", "UTC").cron as unknown as Internals;
    const b = parseCronSpec("*/7 9 * * 1-5", "Asia/Tokyo").cron as unknown as Internals;
    assert.equal(a._states.pattern.year, b._states.pattern.year);
  });
});

describe("scheduleIdFor", () => {
  it("is stable, 20 base-36 chars, and differs by element and name", () => {
    const id = scheduleIdFor("el1", "nightly");
    assert.equal(id, scheduleIdFor("el1", "nightly"));
    assert.match(id, /^[0-9a-z]{20}$/);
    assert.notEqual(id, scheduleIdFor("el2", "nightly"));
    assert.notEqual(id, scheduleIdFor("el1", "hourly"));
    // The separator keeps ("ab","c") and ("a","bc") apart.
    assert.notEqual(scheduleIdFor("ab", "c"), scheduleIdFor("a", "bc"));
  });
});

describe("createSpecCache", () => {
  it("shares one spec per crontab and zone and forgets it when released", () => {
    const cache = createSpecCache();
    const a = cache.acquire("* * * * *", "UTC");
    const b = cache.acquire("*  * * * *", "UTC");
    assert.equal(a, b);
    assert.notEqual(a, cache.acquire("* * * * *", "Europe/Berlin"));
    cache.release(a);
    cache.release(b);
    assert.notEqual(cache.acquire("* * * * *", "UTC"), a);
  });
});
