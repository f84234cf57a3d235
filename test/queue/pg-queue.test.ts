import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { SluiceError } from "../../src/errors.ts";
import { createPgQueue } from "../../src/queue/pg-queue.ts";
import type { RunJob, RunQueue } from "../../src/queue/types.ts";
import { startPostgres } from "../helpers/pg.ts";

const logger = { warn: () => {}, error: () => {} };
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

async function until(cond: () => boolean, ms = 10_000): Promise<void> {
  const end = Date.now() + ms;
  while (!cond()) {
    if (Date.now() > end) throw new Error("condition not met in time");
    await sleep(10);
  }
}

describe("pg-boss run queue", () => {
  let url: string;
  const open: RunQueue[] = [];
  let n = 0;
  const queue = async (
    over: {
      bound?: number;
      concurrency?: number | { flow: number; script: number };
      queueName?: string;
    } = {},
  ) => {
    const q = await createPgQueue({
      connectionString: url,
      bound: over.bound ?? 10_000,
      concurrency: over.concurrency ?? 4,
      logger,
      queueName: over.queueName ?? `q${++n}`,
      poolSize: 4,
    });
    open.push(q);
    return q;
  };

  before(async () => {
    url = await (await startPostgres()).createDatabase();
  });
  after(async () => {
    await Promise.all(open.map((q) => q.stop()));
  });

  it("delivers every job exactly once, carrying only runId and kind", async () => {
    const q = await queue({ concurrency: 8 });
    const seen: RunJob[] = [];
    await q.start(async (job) => {
      seen.push(job);
    });
    const sent = Array.from(
      { length: 200 },
      (_, i): RunJob => ({ runId: `run-${i}`, kind: i % 2 ? "flow" : "script" }),
    );
    await Promise.all(sent.map((j) => q.enqueue(j)));
    await until(() => seen.length >= sent.length);
    await sleep(300); // anything delivered twice would show up now
    assert.equal(seen.length, sent.length);
    assert.deepEqual(new Set(seen.map((j) => j.runId)).size, sent.length);
    const byId = new Map(seen.map((j) => [j.runId, j]));
    for (const j of sent) assert.deepEqual(byId.get(j.runId), j);
  });

  it("two consumers on one queue split the jobs without duplicates", async () => {
    const name = `shared${++n}`;
    const a = await queue({ queueName: name, concurrency: 4 });
    const b = await queue({ queueName: name, concurrency: 4 });
    const seen: string[] = [];
    const got = { a: 0, b: 0 };
    // Everything is queued first, so on a slow machine neither drains it before the other starts.
    for (let i = 0; i < 100; i++) await a.enqueue({ runId: `s-${i}`, kind: "flow" });
    await a.start(async (job) => {
      got.a++;
      seen.push(job.runId);
      await sleep(20);
    });
    await b.start(async (job) => {
      got.b++;
      seen.push(job.runId);
      await sleep(20);
    });
    await until(() => seen.length >= 100);
    await sleep(300);
    assert.equal(seen.length, 100);
    assert.equal(new Set(seen).size, 100);
    assert.ok(got.a > 0 && got.b > 0, `both consumers worked (${got.a}/${got.b})`);
  });

  it("never runs more than `concurrency` jobs at once, and uses all slots", async () => {
    const q = await queue({ concurrency: 3 });
    let running = 0;
    let peak = 0;
    let finished = 0;
    // Queued first: enqueueing slower than jobs finish would never fill every slot.
    for (let i = 0; i < 15; i++) await q.enqueue({ runId: `c-${i}`, kind: "script" });
    await q.start(async () => {
      running++;
      peak = Math.max(peak, running);
      await sleep(40);
      running--;
      finished++;
    });
    await until(() => finished === 15);
    assert.equal(peak, 3);
  });

  it("flow and script jobs have their own lanes and limits", async () => {
    const q = await queue({ concurrency: { flow: 3, script: 1 } });
    const running = { flow: 0, script: 0 };
    const peak = { flow: 0, script: 0 };
    let finished = 0;
    let release: () => void = () => {};
    const scriptsHeld = new Promise<void>((r) => {
      release = r;
    });
    for (let i = 0; i < 4; i++) await q.enqueue({ runId: `ls-${i}`, kind: "script" });
    for (let i = 0; i < 9; i++) await q.enqueue({ runId: `lf-${i}`, kind: "flow" });
    await q.start(async (job) => {
      running[job.kind]++;
      peak[job.kind] = Math.max(peak[job.kind], running[job.kind]);
      if (job.kind === "script") await scriptsHeld;
      else await sleep(30);
      running[job.kind]--;
      finished++;
    });
    // All flows finish while the one script slot is still held.
    await until(() => finished === 9);
    release();
    await until(() => finished === 13);
    assert.deepEqual(peak, { flow: 3, script: 1 });
  });

  it("a node with no slots for a kind leaves those jobs to other nodes", async () => {
    const name = `lanes${++n}`;
    const flowsOnly = await queue({ queueName: name, concurrency: { flow: 2, script: 0 } });
    const scriptsOnly = await queue({ queueName: name, concurrency: { flow: 0, script: 2 } });
    const got: Record<string, string[]> = { flowsOnly: [], scriptsOnly: [] };
    await flowsOnly.start(async (job) => void got.flowsOnly?.push(job.kind));
    await scriptsOnly.start(async (job) => void got.scriptsOnly?.push(job.kind));
    for (let i = 0; i < 5; i++) {
      await flowsOnly.enqueue({ runId: `nf-${i}`, kind: "flow" });
      await flowsOnly.enqueue({ runId: `ns-${i}`, kind: "script" });
    }
    await until(() => (got.flowsOnly?.length ?? 0) + (got.scriptsOnly?.length ?? 0) === 10);
    assert.deepEqual(got, {
      flowsOnly: Array(5).fill("flow"),
      scriptsOnly: Array(5).fill("script"),
    });
  });

  it("a slow job does not hold up the other slots", async () => {
    const q = await queue({ concurrency: 2 });
    let release: () => void = () => {};
    const slow = new Promise<void>((r) => {
      release = r;
    });
    const fast: string[] = [];
    await q.start(async (job) => {
      if (job.runId === "slow") await slow;
      else fast.push(job.runId);
    });
    await q.enqueue({ runId: "slow", kind: "script" });
    await sleep(200);
    for (let i = 0; i < 5; i++) await q.enqueue({ runId: `f-${i}`, kind: "script" });
    await until(() => fast.length === 5);
    release();
  });

  it("a handler that throws neither stalls the queue nor gets the job again", async () => {
    const q = await queue({ concurrency: 1 });
    const calls: string[] = [];
    await q.start(async (job) => {
      calls.push(job.runId);
      if (job.runId === "bad") throw new Error("boom");
    });
    await q.enqueue({ runId: "bad", kind: "flow" });
    await q.enqueue({ runId: "good", kind: "flow" });
    await until(() => calls.includes("good"));
    await sleep(300);
    assert.deepEqual(calls, ["bad", "good"]);
  });

  it("answers 429 once the queue holds `bound` jobs, and accepts again after draining", async () => {
    const q = await queue({ bound: 5, concurrency: 2 });
    for (let i = 0; i < 5; i++) await q.enqueue({ runId: `b-${i}`, kind: "flow" });
    assert.equal(q.depth(), 5);
    await assert.rejects(
      () => q.enqueue({ runId: "b-over", kind: "flow" }),
      (err: unknown) => err instanceof SluiceError && err.code === 429,
    );
    const done: string[] = [];
    await q.start(async (job) => {
      done.push(job.runId);
    });
    await until(() => done.length === 5);
    await q.enqueue({ runId: "b-after", kind: "flow" });
    await until(() => done.includes("b-after"));
    assert.ok(!done.includes("b-over"), "a rejected job is never delivered");
  });

  it("the bound holds across nodes sharing one queue", async () => {
    const name = `bounded${++n}`;
    const a = await queue({ queueName: name, bound: 4 });
    const b = await queue({ queueName: name, bound: 4 });
    for (let i = 0; i < 4; i++) await a.enqueue({ runId: `x-${i}`, kind: "flow" });
    // b has sent nothing itself; its estimate is stale until its periodic recount (every 500 ms).
    await until(() => b.depth() === 4);
    await assert.rejects(
      () => b.enqueue({ runId: "x-over", kind: "flow" }),
      (err: unknown) => err instanceof SluiceError && err.code === 429,
    );
  });

  it("concurrent enqueues cannot overshoot the bound", async () => {
    const q = await queue({ bound: 10 });
    const results = await Promise.allSettled(
      Array.from({ length: 30 }, (_, i) => q.enqueue({ runId: `p-${i}`, kind: "flow" })),
    );
    assert.equal(results.filter((r) => r.status === "fulfilled").length, 10);
  });

  it("jobs enqueued before a worker starts wait for it; stop waits for running jobs", async () => {
    const q = await queue({ concurrency: 2 });
    for (let i = 0; i < 3; i++) await q.enqueue({ runId: `w-${i}`, kind: "flow" });
    let finished = 0;
    await q.start(async () => {
      await sleep(100);
      finished++;
    });
    await until(() => finished >= 1);
    await q.stop();
    assert.ok(finished >= 2, "jobs already running when stop() was called complete first");
  });
});
