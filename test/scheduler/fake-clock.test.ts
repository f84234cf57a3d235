import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { createFakeClock } from "./fake-clock.ts";

describe("fake clock", () => {
  it("fires due timers in order with now() at their due time", () => {
    const clock = createFakeClock(1_000);
    const seen: string[] = [];
    clock.setTimeout(() => seen.push(`b@${clock.now()}`), 20);
    clock.setTimeout(() => seen.push(`a@${clock.now()}`), 10);
    clock.setTimeout(() => seen.push(`c@${clock.now()}`), 20);
    const gone = clock.setTimeout(() => seen.push("never"), 5);
    clock.clearTimeout(gone);
    clock.advance(15);
    assert.deepEqual(seen, ["a@1010"]);
    assert.equal(clock.now(), 1_015);
    clock.advance(100);
    assert.deepEqual(seen, ["a@1010", "b@1020", "c@1020"]);
    assert.equal(clock.pending(), 0);
  });

  it("fires timers set by timers within the same advance", () => {
    const clock = createFakeClock(0);
    const seen: number[] = [];
    const tick = (): void => {
      seen.push(clock.now());
      if (seen.length < 3) clock.setTimeout(tick, 10);
    };
    clock.setTimeout(tick, 10);
    clock.advance(100);
    assert.deepEqual(seen, [10, 20, 30]);
  });

  it("set() moves the wall clock only: timers keep their remaining delay", () => {
    const clock = createFakeClock(1_000);
    const seen: number[] = [];
    clock.setTimeout(() => seen.push(clock.now()), 50);
    clock.set(0);
    clock.advance(49);
    assert.deepEqual(seen, []);
    clock.advance(1);
    assert.deepEqual(seen, [50]);
  });
});
