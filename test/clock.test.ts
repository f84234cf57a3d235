import assert from "node:assert/strict";
import { describe, it, mock } from "node:test";
import { systemClock } from "../src/clock.ts";

const DAY = 86_400_000;

describe("the system clock's timers", () => {
  it("a timer past 2^31 − 1 ms (24.8 days) fires when due, not at once", (t) => {
    t.mock.timers.enable({ apis: ["setTimeout", "Date"], now: 0 });
    const fired: number[] = [];
    systemClock.setTimeout(() => fired.push(Date.now()), 30 * DAY);
    t.mock.timers.tick(1);
    assert.deepEqual(fired, [], "fired after 1 ms");
    t.mock.timers.tick(29 * DAY);
    assert.deepEqual(fired, []);
    t.mock.timers.tick(DAY - 1);
    assert.deepEqual(fired, [30 * DAY]);
  });

  it("a long timer cleared in its second step never fires", (t) => {
    t.mock.timers.enable({ apis: ["setTimeout", "Date"], now: 0 });
    let fired = false;
    const h = systemClock.setTimeout(() => {
      fired = true;
    }, 40 * DAY);
    t.mock.timers.tick(26 * DAY);
    systemClock.clearTimeout(h);
    t.mock.timers.tick(20 * DAY);
    assert.equal(fired, false);
  });

  it("a short timer is Node's own", (t) => {
    t.mock.timers.enable({ apis: ["setTimeout", "Date"], now: 0 });
    const fn = mock.fn();
    systemClock.setTimeout(fn, 1000);
    t.mock.timers.tick(999);
    assert.equal(fn.mock.callCount(), 0);
    t.mock.timers.tick(1);
    assert.equal(fn.mock.callCount(), 1);
  });
});
