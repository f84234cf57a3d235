import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { createTurnSlots, TooManyWaiting } from "../src/turn-slots.ts";

/** A job the test ends by hand, recording when it started. */
function jobs(started: string[]) {
  const ends = new Map<string, () => void>();
  const make = (name: string) => () =>
    new Promise<string>((resolve) => {
      started.push(name);
      ends.set(name, () => resolve(name));
    });
  const end = (name: string) => ends.get(name)?.();
  return { make, end };
}

const A = { app: "a", space: "s" };
const B = { app: "b", space: "s" };
const tick = () => new Promise((r) => setImmediate(r));

describe("slots shared by tenants, taken in turns (src/turn-slots.ts)", () => {
  it("never run more than the slots, nor more than an app's share of them", async () => {
    const started: string[] = [];
    const j = jobs(started);
    const slots = createTurnSlots({ slots: 4, perApp: 2, waitingPerApp: 100 });
    const done = ["a1", "a2", "a3", "a4"].map((n) => slots.run(A, j.make(n)));
    await tick();
    assert.deepEqual(started, ["a1", "a2"], "the app's share, though two slots are free");
    const b = ["b1", "b2", "b3"].map((n) => slots.run(B, j.make(n)));
    await tick();
    assert.deepEqual(started, ["a1", "a2", "b1", "b2"]);
    j.end("a1");
    await tick();
    assert.deepEqual(started.slice(4), ["a3"], "the freed slot goes to the app that may take one");
    for (const n of ["a2", "a3", "b1", "b2", "b3", "a4"]) {
      j.end(n);
      await tick();
    }
    assert.deepEqual(await Promise.all([...done, ...b]), [
      "a1",
      "a2",
      "a3",
      "a4",
      "b1",
      "b2",
      "b3",
    ]);
  });

  it("refuses a job past the app's waiting bound, and takes another app's", async () => {
    const started: string[] = [];
    const j = jobs(started);
    const slots = createTurnSlots({ slots: 1, perApp: 1, waitingPerApp: 2 });
    void slots.run(A, j.make("a1"));
    void slots.run(A, j.make("a2"));
    void slots.run(A, j.make("a3"));
    await assert.rejects(slots.run(A, j.make("a4")), TooManyWaiting);
    const b = slots.run(B, j.make("b1"));
    j.end("a1");
    await tick();
    assert.deepEqual(started, ["a1", "b1"], "the other app goes before the second of the first");
    j.end("b1");
    assert.equal(await b, "b1");
  });

  it("a job that throws before its promise fails alone, and its slot is freed", {
    timeout: 30_000,
  }, async () => {
    const started: string[] = [];
    const j = jobs(started);
    const slots = createTurnSlots({ slots: 1, perApp: 1, waitingPerApp: 10 });
    const thrower = (): Promise<string> => {
      throw new Error("thrown at once");
    };
    // Started at once, in a free slot.
    await assert.rejects(slots.run(A, thrower), /thrown at once/);
    // Started when another job's slot frees.
    const first = slots.run(A, j.make("a1"));
    const second = slots.run(A, thrower);
    const third = slots.run(A, j.make("a2"));
    j.end("a1");
    assert.equal(await first, "a1");
    await assert.rejects(second, /thrown at once/);
    await tick();
    assert.deepEqual(started, ["a1", "a2"], "the slot went on to the next job");
    j.end("a2");
    assert.equal(await third, "a2");
  });
});
