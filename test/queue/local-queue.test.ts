import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { SluiceError } from "../../src/errors.ts";
import { createLocalQueue } from "../../src/queue/local-queue.ts";
import type { RunJob } from "../../src/queue/types.ts";
import { condition } from "../helpers/wait.ts";

function deferred() {
  let resolve = () => {};
  const promise = new Promise<void>((r) => (resolve = r));
  return { promise, resolve };
}

describe("local queue", () => {
  it("delivers in FIFO order per kind within each kind's concurrency", async () => {
    const q = createLocalQueue({ bound: 100, concurrency: { flow: 2, script: 1 } });
    const gates = new Map<string, ReturnType<typeof deferred>>();
    const started: string[] = [];
    await q.start(async (job: RunJob) => {
      started.push(job.runId);
      const g = deferred();
      gates.set(job.runId, g);
      await g.promise;
    });
    for (const id of ["f1", "f2", "f3"]) await q.enqueue({ runId: id, kind: "flow" });
    for (const id of ["s1", "s2"]) await q.enqueue({ runId: id, kind: "script" });
    assert.deepEqual(started, ["f1", "f2", "s1"]);
    gates.get("f1")?.resolve();
    await new Promise((r) => setImmediate(r));
    assert.deepEqual(started, ["f1", "f2", "s1", "f3"]);
    gates.get("s1")?.resolve();
    await new Promise((r) => setImmediate(r));
    assert.equal(started.at(-1), "s2");
    for (const g of gates.values()) g.resolve();
    await q.stop();
  });

  it("answers 429 past the bound, except for re-queued accepted runs", async () => {
    const q = createLocalQueue({ bound: 2, concurrency: { flow: 1, script: 1 } });
    await q.enqueue({ runId: "a", kind: "flow" });
    await q.enqueue({ runId: "b", kind: "flow" });
    await assert.rejects(
      q.enqueue({ runId: "c", kind: "flow" }),
      (e: unknown) => e instanceof SluiceError && e.code === 429,
    );
    await q.enqueue({ runId: "d", kind: "flow" }, { ignoreBound: true });
    assert.equal(q.depth(), 3);
  });

  it("a throwing handler does not stall the lane", async () => {
    const q = createLocalQueue({ bound: 10, concurrency: { flow: 1, script: 1 } });
    const done: string[] = [];
    const progress = condition();
    await q.start(async (job) => {
      if (job.runId === "bad") throw new Error("boom");
      done.push(job.runId);
      progress.changed();
    });
    await q.enqueue({ runId: "bad", kind: "flow" });
    await q.enqueue({ runId: "good", kind: "flow" });
    await progress.until(() => done.length > 0, "the job after the throwing one ran");
    await q.stop();
    assert.deepEqual(done, ["good"]);
  });
});
