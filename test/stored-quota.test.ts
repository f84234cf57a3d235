import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { SluiceError } from "../src/errors.ts";
import { createStoredQuota, STORED_READ_MS } from "../src/stored-quota.ts";
import { createFakeClock } from "./scheduler/fake-clock.ts";

/**
 * LIMIT_STORED_BYTES_PER_APP's reads (docs/security.md, "What an app may store"): an app at its
 * bound is refused from what was read, not read again for every refused write. A tenant at the
 * bound that kept sending runs had each refusal sum its counters, revisions and script versions
 * in the database (the room left is 0 or less, and "half the room left" was always reached).
 */
describe("stored quota", () => {
  const refusedWith = (err: unknown) => err instanceof SluiceError && err.code === 28010008;

  it("refuses an app at its bound from one read a second, and reads again after a delete", async () => {
    const clock = createFakeClock();
    let reads = 0;
    let total = 1000;
    const quota = createStoredQuota({
      store: {
        storedBytes: async () => {
          reads++;
          return total;
        },
      },
      clock,
      limit: 1000,
    });
    for (let i = 0; i < 50; i++)
      await assert.rejects(quota.admit("a", 10, "a run"), refusedWith, `admit ${i}`);
    assert.equal(reads, 1, "one read for 50 refusals within a second");
    clock.advance(STORED_READ_MS);
    await assert.rejects(quota.admit("a", 10, "a run"), refusedWith);
    assert.equal(reads, 2, "read again once the read is a second old");
    total = 100;
    quota.forget("a");
    await quota.admit("a", 10, "a run");
    assert.equal(reads, 3, "a delete here reads again at once");
  });

  it("still reads again early as the room left shrinks", async () => {
    const clock = createFakeClock();
    let reads = 0;
    const quota = createStoredQuota({
      store: {
        storedBytes: async () => {
          reads++;
          return 600;
        },
      },
      clock,
      limit: 1000,
    });
    await quota.admit("a", 150, "a run");
    assert.equal(reads, 1);
    await quota.admit("a", 100, "a run");
    assert.equal(reads, 1, "150 counted since, 400 left: no read");
    await quota.admit("a", 10, "a run");
    assert.equal(reads, 2, "250 counted since, more than half of the 400 left: read again");
  });
});
