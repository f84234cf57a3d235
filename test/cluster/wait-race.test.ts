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
    const clock = createFakeClock();
    const events = createRunEvents({ clock });
    let status: Run["status"] = "STARTED";
    let reads = 0;
    const store = {
      async getRun() {
        reads++;
        return { id: "r2", status } as Run;
      },
    } as unknown as Store;
    const waited = waitForRunEnd({ store, events, clock }, null, "r2", 60_000);
    while (events.waiting() === 0) await new Promise((r) => setImmediate(r));
    status = "SUCCESS";
    events.notify("r2");
    assert.equal((await waited)?.status, "SUCCESS");
    assert.equal(reads, 2);
    assert.equal(events.waiting(), 0);
    assert.equal(clock.pending(), 0, "no timer left");

    // One already ended: a single read, and nothing left waiting either.
    reads = 0;
    assert.equal(
      (await waitForRunEnd({ store, events, clock }, null, "r2", 60_000))?.status,
      "SUCCESS",
    );
    assert.equal(reads, 1);
    assert.equal(events.waiting(), 0);
  });

  it("answers a run still going when the time is up from a last read", async () => {
    const clock = createFakeClock();
    const events = createRunEvents({ clock });
    let reads = 0;
    const store = {
      async getRun() {
        reads++;
        return { id: "r3", status: "STARTED" } as Run;
      },
    } as unknown as Store;
    const waited = waitForRunEnd({ store, events, clock }, null, "r3", 1000);
    while (events.waiting() === 0) await new Promise((r) => setImmediate(r));
    clock.advance(1000);
    assert.equal((await waited)?.status, "STARTED");
    assert.equal(reads, 2);
    assert.equal(events.waiting(), 0);
  });

  it("a store that fails: the failure is the answer, and nothing is left waiting", async () => {
    const clock = createFakeClock();
    const events = createRunEvents({ clock });
    let reads = 0;
    const store = {
      async getRun() {
        reads++;
        if (reads === 2) throw new Error("the database went away");
        return { id: "r4", status: "STARTED" } as Run;
      },
    } as unknown as Store;
    const waited = waitForRunEnd({ store, events, clock }, null, "r4", 60_000);
    while (events.waiting() === 0) await new Promise((r) => setImmediate(r));
    // Woken by an end the store then cannot confirm: the next read fails.
    events.notify("r4");
    await assert.rejects(waited, /the database went away/);
    assert.equal(events.waiting(), 0);
    assert.equal(clock.pending(), 0, "no timer left");
  });

  it("woken by ends the store does not show: waits on, and answers at its deadline", async () => {
    const clock = createFakeClock();
    const events = createRunEvents({ clock });
    let reads = 0;
    const store = {
      async getRun() {
        reads++;
        return { id: "r5", status: "STARTED" } as Run;
      },
    } as unknown as Store;
    let settled = false;
    const waited = waitForRunEnd({ store, events, clock }, null, "r5", 1000).then((r) => {
      settled = true;
      return r;
    });
    for (let i = 1; i <= 3; i++) {
      while (events.waiting() === 0 || reads < i) await new Promise((r) => setImmediate(r));
      events.notify("r5");
      clock.advance(100);
    }
    while (events.waiting() === 0 || reads < 4) await new Promise((r) => setImmediate(r));
    assert.equal(settled, false);
    clock.advance(700);
    assert.equal((await waited)?.status, "STARTED");
    assert.equal(reads, 5, "one read per wake, and one at the deadline");
    assert.equal(events.waiting(), 0);
    assert.equal(clock.pending(), 0, "no timer left");
  });
});
