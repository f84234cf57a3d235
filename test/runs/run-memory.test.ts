import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { createRunMemory } from "../../src/runs/run-memory.ts";

const A = { app: "a", space: "s" };
const B = { app: "b", space: "s" };

describe("run memory (docs/run-limits.md, Values in memory)", () => {
  it("refuses past an app's share with a 429 naming the setting, and gives back on free", () => {
    const memory = createRunMemory({ runBytesInFlight: 100, runBytesInFlightPerApp: 60 });
    const run1 = memory.hold(A);
    run1.take(40);
    const early = run1.take(20);
    assert.throws(
      () => memory.hold(A).take(1),
      (err: Error & { code?: number }) =>
        err.code === 429 && /LIMIT_RUN_BYTES_IN_FLIGHT_PER_APP \(60\)/.test(err.message),
    );
    early();
    early(); // once only
    memory.hold(A).take(20);
    // The node's bound: b may take 40 of the 100 while a holds 60.
    const run2 = memory.hold(B);
    run2.take(40);
    assert.throws(() => memory.hold(B).take(1), /LIMIT_RUN_BYTES_IN_FLIGHT \(100\)/);
    run1.free();
    run1.free();
    memory.hold(B).take(20);
  });
});
