import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { createRunEvents } from "../../src/runs/run-events.ts";
import { waitForRunEnd } from "../../src/runs/wait.ts";
import type { Run, Store } from "../../src/store/types.ts";
import { createFakeClock } from "../scheduler/fake-clock.ts";

/**
 * In a cluster a run's end reaches a waiting API node by NOTIFY, on another connection than the
 * waiter's read: it can arrive while the read that still saw the run STARTED is on its way back.
 */
/** A fake clock and events, and a store whose `getRun` answers `read(n)` for its n-th read. */
function setup(read: (n: number) => Run) {
  const clock = createFakeClock();
  const events = createRunEvents({ clock });
  let reads = 0;
  const store = {
    async getRun() {
      reads++;
      return read(reads);
    },
  } as unknown as Store;
  return {
    clock,
    events,
    deps: { store, events, clock },
    reads: () => reads,
    /** Until the wait has subscribed. */
    subscribed: async () => {
      while (events.waiting() === 0) await new Promise((r) => setImmediate(r));
    },
  };
}

describe("waiting for a run's end across nodes", () => {
  it("an end notified between the read and the subscription still ends the wait at once", async () => {
    const clock = createFakeClock();
    const events = createRunEvents({ clock });
    let status: Run["status"] = "STARTED";
    let reads = 0;
    const store = {
      async getRun() {
        reads++;
        const seen = { id: "r1", status } as Run;
        if (reads === 1) {
          // The worker ends the run and its NOTIFY is handled before this read's answer.
          status = "SUCCESS";
          events.notify("r1");
        }
        return seen;
      },
    } as unknown as Store;
    let settled = false;
    const waited = waitForRunEnd({ store, events, clock }, null, "r1", 300_000).then((r) => {
      settled = true;
      return r;
    });
    // Let the reads and their continuations run; no time passes on the fake clock.
    for (let i = 0; i < 20 && !settled; i++) await new Promise((r) => setImmediate(r));
    assert.equal(settled, true, "the wait did not sit out its timeout");
    assert.equal((await waited)?.status, "SUCCESS");
  });

  it("reads a run that ends while waited for twice, and leaves no subscription behind", async () => {
    let status: Run["status"] = "STARTED";
    const t = setup(() => ({ id: "r2", status }) as Run);
    const waited = waitForRunEnd(t.deps, null, "r2", 60_000);
    await t.subscribed();
    status = "SUCCESS";
    t.events.notify("r2");
    assert.equal((await waited)?.status, "SUCCESS");
    assert.equal(t.reads(), 2);
    assert.equal(t.events.waiting(), 0);
    assert.equal(t.clock.pending(), 0, "no timer left");

    // One already ended: a single read, and nothing left waiting either.
    assert.equal((await waitForRunEnd(t.deps, null, "r2", 60_000))?.status, "SUCCESS");
    assert.equal(t.reads(), 3);
    assert.equal(t.events.waiting(), 0);
  });

  it("answers a run still going when the time is up from a last read", async () => {
    const t = setup(() => ({ id: "r3", status: "STARTED" }) as Run);
    const waited = waitForRunEnd(t.deps, null, "r3", 1000);
    await t.subscribed();
    t.clock.advance(1000);
    assert.equal((await waited)?.status, "STARTED");
    assert.equal(t.reads(), 2);
    assert.equal(t.events.waiting(), 0);
  });

  it("a store that fails: the failure is the answer, and nothing is left waiting", async () => {
    const t = setup((n) => {
      if (n === 2) throw new Error("the database went away");
      return { id: "r4", status: "STARTED" } as Run;
    });
    const waited = waitForRunEnd(t.deps, null, "r4", 60_000);
    await t.subscribed();
    // Woken by an end the store then cannot confirm: the next read fails.
    t.events.notify("r4");
    await assert.rejects(waited, /the database went away/);
    assert.equal(t.events.waiting(), 0);
    assert.equal(t.clock.pending(), 0, "no timer left");
  });

  it("woken by ends the store does not show: waits on, and answers at its deadline", async () => {
    const t = setup(() => ({ id: "r5", status: "STARTED" }) as Run);
    let settled = false;
    const waited = waitForRunEnd(t.deps, null, "r5", 1000).then((r) => {
      settled = true;
      return r;
    });
    const readAndSubscribed = async (n: number) => {
      while (t.events.waiting() === 0 || t.reads() < n) await new Promise((r) => setImmediate(r));
    };
    for (let i = 1; i <= 3; i++) {
      await readAndSubscribed(i);
      t.events.notify("r5");
      t.clock.advance(100);
    }
    await readAndSubscribed(4);
    assert.equal(settled, false);
    t.clock.advance(700);
    assert.equal((await waited)?.status, "STARTED");
    assert.equal(t.reads(), 5, "one read per wake, and one at the deadline");
    assert.equal(t.events.waiting(), 0);
    assert.equal(t.clock.pending(), 0, "no timer left");
  });
});
