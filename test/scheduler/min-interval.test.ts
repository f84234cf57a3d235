import assert from "node:assert/strict";
import { describe, it } from "node:test";
import fc from "fast-check";
import { nextTick, parseCronSpec, previousTick } from "../../src/scheduler/cron-spec.ts";
import { createScheduler } from "../../src/scheduler/scheduler.ts";
import { createFakeClock } from "./fake-clock.ts";

const at = (iso: string): number => Date.parse(iso);
const iso = (ms: number): string => new Date(ms).toISOString();
const MIN = 60_000;

/** The crontab's own ticks from `from`, without any window: at most `n`, before `to`. */
function rawTicks(
  crontab: string,
  timezone: string,
  from: number,
  to: number,
  n: number,
): number[] {
  const spec = parseCronSpec(crontab, timezone);
  const out: number[] = [];
  for (
    let t = nextTick(spec, from - 1);
    t !== null && t < to && out.length < n;
    t = nextTick(spec, t)
  )
    out.push(t);
  return out;
}

describe("LIMIT_SCHEDULE_MIN_INTERVAL_S: one tick per window (docs/scheduler.md)", () => {
  it("a per-second schedule with a 60 s window ticks once a minute, at each minute's first second", () => {
    const spec = parseCronSpec("* * * * * *", "UTC", 60_000);
    const out: string[] = [];
    let t: number | null = at("2025-01-01T00:00:30Z");
    for (let i = 0; i < 3 && t !== null; i++) {
      t = nextTick(spec, t);
      if (t !== null) out.push(iso(t));
    }
    assert.deepEqual(out, [
      "2025-01-01T00:01:00.000Z",
      "2025-01-01T00:02:00.000Z",
      "2025-01-01T00:03:00.000Z",
    ]);
    assert.equal(
      previousTick(spec, at("2025-01-01T00:02:59Z")),
      at("2025-01-01T00:02:00Z"),
      "the catch-up tick is the window's first, not the crontab's last",
    );
  });

  it("a window of a second or less, or 0, changes no tick", () => {
    for (const w of [0, 500, 1000]) {
      const spec = parseCronSpec("*/2 * * * * *", "UTC", w);
      assert.equal(spec.windowMs, 0);
      assert.equal(nextTick(spec, at("2025-01-01T00:00:00.500Z")), at("2025-01-01T00:00:02Z"));
    }
    assert.notEqual(
      parseCronSpec("* * * * *", "UTC", 0).key,
      parseCronSpec("* * * * *", "UTC", 120_000).key,
    );
  });

  it("for any crontab and window: the ticks are the crontab's, each window's first, one per window", () => {
    const crontabs = [
      "* * * * * *",
      "*/7 * * * * *",
      "0,1,59 * * * * *",
      "*/5 * * * *",
      "0,1 */2 * * *",
      "58,59 23 * * *",
      "0 0 1,2 * *",
      "*/13 3-5 * * 1-5",
    ];
    fc.assert(
      fc.property(
        fc.constantFrom(...crontabs),
        fc.constantFrom("UTC", "Europe/Berlin", "Asia/Kolkata"),
        fc.integer({ min: 2, max: 600 }).map((s) => s * 1000),
        fc.integer({ min: at("2024-01-01T00:00:00Z"), max: at("2027-01-01T00:00:00Z") }),
        (crontab, tz, windowMs, from) => {
          const spec = parseCronSpec(crontab, tz, windowMs);
          // Three days, or as far as 600 of the crontab's ticks reach (per-second ones: minutes).
          const raw = rawTicks(crontab, tz, from - windowMs, from + 3 * 24 * 60 * MIN, 600);
          const to = raw.length === 600 ? (raw[599] as number) : from + 3 * 24 * 60 * MIN;
          // Expected: the first raw tick of every window that holds one, after `from`.
          const firsts = new Map<number, number>();
          for (const t of raw) {
            const w = Math.floor(t / windowMs);
            if (!firsts.has(w)) firsts.set(w, t);
          }
          const want = [...firsts.values()].filter((t) => t > from && t < to);
          const got: number[] = [];
          for (let t = nextTick(spec, from); t !== null && t < to; t = nextTick(spec, t))
            got.push(t);
          assert.deepEqual(got.map(iso), want.map(iso));
          for (const t of got) assert.equal(previousTick(spec, t + 1), t);
          if (got.length > 1) {
            const mid =
              (got[0] as number) + Math.floor(((got[1] as number) - (got[0] as number)) / 2);
            assert.equal(previousTick(spec, mid + 1), got[0]);
          }
        },
      ),
      { numRuns: 60 },
    );
  });

  it("the scheduler fires a per-second schedule once per window and shows the next allowed tick", async () => {
    const clock = createFakeClock(at("2025-01-01T00:00:30Z"));
    const fired: string[] = [];
    const scheduler = createScheduler({
      clock,
      logger: { warn() {}, error() {} },
      minIntervalMs: 5 * MIN,
      fire: async (_s, tick) => {
        fired.push(iso(tick));
      },
    });
    scheduler.upsertFlow("el1", [{ type: "cron", name: "s", crontab: "* * * * * *" }], true);
    await scheduler.start();
    clock.advance(16 * MIN);
    scheduler.stop();
    assert.deepEqual(fired, [
      "2025-01-01T00:05:00.000Z",
      "2025-01-01T00:10:00.000Z",
      "2025-01-01T00:15:00.000Z",
    ]);
    assert.equal(scheduler.schedules("el1")[0]?.nextRunAt, at("2025-01-01T00:20:00Z"));
  });
});
