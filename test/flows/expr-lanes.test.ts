import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { inlineExpressions, type Job } from "../../src/flows/expr-jobs.ts";
import { createExpressionLanes } from "../../src/flows/expr-lanes.ts";

/** A pool that records what reaches it and answers what the worker would (a marker here). */
function recordingPool() {
  const jobs: Job[] = [];
  return {
    jobs,
    run: async (job: Job) => {
      jobs.push(job);
      return "from the pool";
    },
  };
}

const orders = [
  { amount: 2, qty: 3 },
  { amount: 0, qty: 1 },
];

describe("expression lanes", () => {
  it("evaluate a job of bounded expressions here, and send any other to the pool", async () => {
    const pool = recordingPool();
    const lanes = createExpressionLanes({ pool, inlineMs: 50 });
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
    const lanes = createExpressionLanes({ pool, inlineMs: 20 });
    // Bounded (every step is checked), but slow over a large input.
    const slow = [{ type: "expr", expr: "$count(xs[$ % 7 = 3 or $ % 11 = 5])" }];
    const xs = Array.from({ length: 300_000 }, (_, i) => i);
    assert.equal(await lanes.transform(slow, { xs }, null), "from the pool");
    assert.equal(await lanes.transform(slow, { xs: [3] }, null), "from the pool");
    assert.equal(pool.jobs.length, 2);
  });

  it("answer errors of bounded expressions as the pool would", async () => {
    const lanes = createExpressionLanes({ pool: recordingPool(), inlineMs: 50 });
    const bad = [{ type: "expr", expr: "1 + 'a'" }];
    const why = await inlineExpressions()
      .transform(bad, {}, null)
      .catch((e: Error) => e.message);
    assert.match(String(why), /must evaluate to a number/);
    await assert.rejects(lanes.transform(bad, {}, null), { message: why });
  });

  it("send everything to the pool when the service's thread evaluates nothing", async () => {
    const pool = recordingPool();
    const lanes = createExpressionLanes({ pool, inlineMs: 0 });
    assert.equal(await lanes.template("{{1}}", null, null), "from the pool");
    assert.equal(pool.jobs.length, 1);
  });
});
