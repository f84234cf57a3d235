import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { inlineExpressions, type Job } from "../../src/flows/expr-jobs.ts";
import { createExpressionLanes as lanesFor } from "../../src/flows/expr-lanes.ts";

/** A pool that records what reaches it, and whose, and answers a marker. */
function recordingPool() {
  const jobs: Job[] = [];
  const tenants: unknown[] = [];
  return {
    jobs,
    tenants,
    run: async (job: Job, tenant: unknown) => {
      jobs.push(job);
      tenants.push(tenant);
      return "from the pool";
    },
  };
}

const SCOPE = { app: "shop", space: "prod" };
/** The lanes of one tenant's runs. */
const createExpressionLanes = (o: Parameters<typeof lanesFor>[0]) => lanesFor(o)(SCOPE);

const orders = [
  { amount: 2, qty: 3 },
  { amount: 0, qty: 1 },
];

describe("expression lanes", () => {
  it("evaluate a job of bounded expressions here, and send any other to the pool", async () => {
    const pool = recordingPool();
    const lanes = createExpressionLanes({ pool, inlineMs: 50, sizeBudget: 1 << 20 });
    const chain = [
      { type: "filter", expr: "amount > 0" },
      { type: "map", fields: { total: "amount * qty" } },
    ];
    assert.deepEqual(await lanes.transform(chain, orders, null), [{ amount: 2, qty: 3, total: 6 }]);
    assert.deepEqual(await lanes.conditions(["total > 5"], { total: 6 }, null), [true]);
    assert.equal(await lanes.template("n={{n}}", { n: 1 }, null), "n=1");
    assert.equal(pool.jobs.length, 0);

    const withRegex = [...chain, { type: "filter", expr: "$contains(name, /x/)" }];
    assert.equal(await lanes.transform(withRegex, orders, null), "from the pool");
    assert.equal(await lanes.deep({ a: "{{$sort(xs)}}" }, {}, null), "from the pool");
    assert.deepEqual(
      pool.jobs.map((j) => j.kind),
      ["transform", "deep"],
    );
  });

  it("send a bounded job that reached the short limit to the pool, then always", async () => {
    const pool = recordingPool();
    // The input is about 2 MB as JSON: within the budget, so the service's thread tries it.
    const lanes = createExpressionLanes({ pool, inlineMs: 20, sizeBudget: 1 << 23 });
    // Bounded (every step is checked), but slow over a large input.
    const slow = [{ type: "expr", expr: "$count(xs[$ % 7 = 3 or $ % 11 = 5])" }];
    const xs = Array.from({ length: 300_000 }, (_, i) => i);
    assert.equal(await lanes.transform(slow, { xs }, null), "from the pool");
    assert.equal(await lanes.transform(slow, { xs: [3] }, null), "from the pool");
    assert.equal(pool.jobs.length, 2);
  });

  it("answer values as JSON data, as the processes do, so the lane never changes a result", async () => {
    const lanes = createExpressionLanes({
      pool: recordingPool(),
      inlineMs: 50,
      sizeBudget: 1 << 20,
    });
    // A path over nested arrays answers a JSONata sequence (an array with markers of its own).
    const input = { items: [{ t: [1, 2] }, { t: [3] }] };
    const value = await lanes.transform([{ type: "map", fields: { x: "items.t" } }], input, null);
    assert.deepEqual(value, { ...input, x: [1, 2, 3] });
    assert.deepEqual(Object.keys((value as { x: object }).x), ["0", "1", "2"], "no markers left");
  });

  it("answer errors of bounded expressions as the pool would", async () => {
    const lanes = createExpressionLanes({
      pool: recordingPool(),
      inlineMs: 50,
      sizeBudget: 1 << 20,
    });
    const bad = [{ type: "expr", expr: "1 + 'a'" }];
    const why = await inlineExpressions()
      .transform(bad, {}, null)
      .catch((e: Error) => e.message);
    assert.match(String(why), /must evaluate to a number/);
    await assert.rejects(lanes.transform(bad, {}, null), { message: why });
  });

  it("send everything to the pool when the service's thread evaluates nothing", async () => {
    const pool = recordingPool();
    const lanes = createExpressionLanes({ pool, inlineMs: 0, sizeBudget: 1 << 20 });
    assert.equal(await lanes.template("{{1}}", null, null), "from the pool");
    assert.equal(pool.jobs.length, 1);
  });

  it("send each job as its run's tenant's, whichever lane sent it", async () => {
    const pool = recordingPool();
    for (const inlineMs of [0, 50]) {
      const lanes = lanesFor({ pool, inlineMs, sizeBudget: 1 << 20 });
      await lanes({ app: "shop", space: "prod" }).template("{{$sort(xs)}}", { xs: [1] }, null);
      await lanes({ app: "shop", space: "test" }).template("{{$sort(xs)}}", { xs: [1] }, null);
      await lanes({ app: 'shop","prod', space: "" }).template("{{$sort(xs)}}", {}, null);
    }
    assert.equal(pool.tenants.length, 6);
    assert.equal(new Set(pool.tenants.map((t) => JSON.stringify(t))).size, 3, "three tenants");
    assert.deepEqual(pool.tenants.slice(0, 3), pool.tenants.slice(3));
  });

  // Found by review: each of these held the service's thread for seconds although every
  // expression in it is bounded (measured on the branch before the fix, as noted).
  it("bound a job's whole time on the service's thread, not each evaluation", async () => {
    const pool = recordingPool();
    // A limit no single evaluation here comes near, which the job as a whole passes many times.
    const lanes = createExpressionLanes({ pool, inlineMs: 1000, sizeBudget: 1 << 26 });
    // One evaluation per record, each far under the limit: 5 million numbers (10 MB) took ~50 s.
    const xs = Array.from({ length: 1_500_000 }, (_, i) => i);
    const filter = [{ type: "filter", expr: "$ >= 0" }];
    const out = await lanes.transform(filter, xs, null);
    assert.ok(out === "from the pool", "the whole job ran on the service's thread");
  });

  it("send operators that evaluate no expression to the pool", async () => {
    const pool = recordingPool();
    const lanes = createExpressionLanes({ pool, inlineMs: 50, sizeBudget: 1 << 20 });
    // flatten of one record of 3000 keys with an array of 3000 items (35 kB): 9 million copies,
    // 9 s. Each of these is a loop of the service with no check in it.
    const rec: Record<string, unknown> = { a: [1, 2] };
    for (let i = 0; i < 3; i++) rec[`k${i}`] = 0;
    for (const op of [
      { type: "flatten", field: "a" },
      { type: "sort", by: [{ field: "a" }] },
      { type: "distinct" },
      { type: "aggregate", metrics: { n: { fn: "count" } } },
      { type: "select", fields: ["a"] },
      { type: "rename", mapping: { a: "b" } },
      { type: "map", fields: {} },
    ])
      assert.equal(await lanes.transform([op], [rec], null), "from the pool", op.type);
    assert.deepEqual(await lanes.transform([{ type: "limit", count: 1 }], [rec, rec], null), [rec]);
  });

  it("send a job whose input or value repeats one large part past the budget to the pool", async () => {
    const pool = recordingPool();
    const lanes = createExpressionLanes({ pool, inlineMs: 50, sizeBudget: 1 << 20 });
    // $params.pad for each of 20 000 records: 90 kB in, 1 GB of JSON out (2.4 s to fail in
    // JSON.stringify when the run ended); and a map of $params.a, $params.b for 200 records then
    // `$.x = $.y` compared the pair 200 times in one native step (5 s for 400 kB in).
    const params = { items: Array.from({ length: 2000 }, () => 0), pad: "x".repeat(5000) };
    const map = [
      { type: "expr", expr: "items" },
      { type: "map", fields: { x: "$params.pad" } },
    ];
    assert.equal(await lanes.transform(map, params, params), "from the pool");
    // A node output that refers to one value many times (merges of one node's output do).
    const big = Array.from({ length: 10_000 }, (_, i) => i);
    const shared = { xs: Array.from({ length: 200 }, () => big) };
    assert.equal(await lanes.conditions(["$count(xs) > 0"], shared, null), "from the pool");
    assert.equal(await lanes.template("{{n}}", { n: 1 }, shared), "from the pool");
    assert.equal(pool.jobs.length, 3);
    // Small values still run here.
    assert.deepEqual(await lanes.conditions(["$count(xs) > 0"], { xs: big }, null), [true]);
    assert.equal(pool.jobs.length, 3);
  });
});
