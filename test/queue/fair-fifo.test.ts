import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { createFairFifo } from "../../src/queue/fair-fifo.ts";
import { createLocalQueue } from "../../src/queue/local-queue.ts";
import type { RunJob } from "../../src/queue/types.ts";
import { condition } from "../helpers/wait.ts";

describe("fair turns (embedded queue)", () => {
  it("hands out one item per key in turn, each key in its own order", () => {
    const f = createFairFifo<string>();
    for (let i = 0; i < 3; i++) f.push("a", `a${i}`);
    f.push("b", "b0");
    f.push("c", "c0");
    f.push("b", "b1");
    const out: string[] = [];
    for (let x = f.shift(); x !== undefined; x = f.shift()) out.push(x);
    assert.deepEqual(out, ["a0", "b0", "c0", "a1", "b1", "a2"]);
    assert.equal(f.size, 0);
  });

  it("a space's single job starts within one turn while another space has 5,000 queued", async () => {
    const q = createLocalQueue({ bound: 10_000, concurrency: { flow: 1, script: 1 } });
    const a = { app: "app", space: "a" };
    for (let i = 0; i < 5000; i++) await q.enqueue({ runId: `a${i}`, kind: "flow", scope: a });
    await q.enqueue({ runId: "b0", kind: "flow", scope: { app: "app", space: "b" } });
    const order: string[] = [];
    const seen = condition();
    await q.start(async (job: RunJob) => {
      order.push(job.runId);
      seen.changed();
    });
    await seen.until(() => order.length === 5001, "every job delivered");
    assert.deepEqual(order.slice(0, 3), ["a0", "b0", "a1"]);
    assert.deepEqual(
      order.filter((id) => id.startsWith("a")),
      Array.from({ length: 5000 }, (_, i) => `a${i}`),
    );
    await q.stop();
  });
});
