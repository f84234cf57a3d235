import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { ErrorCode, SluiceError } from "../../src/errors.ts";
import { startWithinWindow } from "../../src/scheduler/refused-retry.ts";
import type { Schedule } from "../../src/scheduler/scheduler.ts";
import { createFakeClock } from "./fake-clock.ts";

const silent = { warn() {}, error() {} };
const T0 = Date.UTC(2025, 0, 1, 12, 0, 0);
const everyMinute: Schedule = {
  scheduleId: "s",
  elementId: "1",
  name: "tick",
  crontab: "0 * * * * *",
  timezone: "UTC",
  parameter: null,
};
const full = () => new SluiceError(ErrorCode.TOO_MANY, ["queue holds 10 runs"]);

describe("a scheduled start refused with 429 (docs/scheduler.md)", () => {
  it("is tried again on the clock until the queue takes it", async () => {
    const clock = createFakeClock(T0);
    let tries = 0;
    const done = startWithinWindow({ clock, logger: silent }, everyMinute, T0, async () => {
      tries++;
      if (tries < 3) throw full();
      return true;
    });
    await clock.advanceAsync(250 + 500);
    await done;
    assert.equal(tries, 3);
    assert.equal(clock.pending(), 0);
  });

  it("gives up at the schedule's next tick, which stands for the slot", async () => {
    const clock = createFakeClock(T0);
    const at: number[] = [];
    const done = startWithinWindow({ clock, logger: silent }, everyMinute, T0, async () => {
      at.push(clock.now());
      throw full();
    });
    const refused = assert.rejects(
      done,
      (e: unknown) => e instanceof SluiceError && e.code === 429,
    );
    await clock.advanceAsync(120_000);
    await refused;
    const last = at.at(-1) ?? 0;
    assert.ok(at.length > 5, `${at.length} tries`);
    assert.ok(last < T0 + 60_000, "no try after the next tick");
    assert.ok(last > T0 + 50_000, "tried until close to the next tick");
  });

  it("does not retry other failures", async () => {
    const clock = createFakeClock(T0);
    let tries = 0;
    await assert.rejects(
      startWithinWindow({ clock, logger: silent }, everyMinute, T0, async () => {
        tries++;
        throw new SluiceError(ErrorCode.FLOW_NOT_RUNNABLE, ["f", "OBSOLETE"]);
      }),
      (e: unknown) => e instanceof SluiceError && e.code === ErrorCode.FLOW_NOT_RUNNABLE,
    );
    assert.equal(tries, 1);
  });
});
