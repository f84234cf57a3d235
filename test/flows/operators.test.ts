import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { createEvaluator } from "../../src/flows/expr.ts";
import { applyOperators, OPERATORS } from "../../src/flows/operators/index.ts";

const orders = [
  { id: 1, customer: "ann", region: "eu", amount: 120, qty: 2, tags: ["new", "vip"] },
  { id: 2, customer: "bob", region: "us", amount: 0, qty: 1, tags: [] },
  { id: 3, customer: "cid", region: "eu", amount: 80, qty: 5, tags: ["vip"] },
  { id: 4, customer: "ann", region: "us", amount: 45.5, qty: 1 },
];
const params = { minAmount: 50, rate: 0.1 };
const ev = createEvaluator({ timeoutMs: 5000, depth: 500 });
const ctx = { evaluate: (text: string, input: unknown) => ev.evaluate(text, input, params) };
const run = (type: string, op: Record<string, unknown>, input: unknown = orders) => {
  const def = OPERATORS[type];
  assert.ok(def);
  return def.apply({ type, ...op }, input, ctx);
};

describe("operators", () => {
  it("filter keeps records where the expression holds, with $params bound", async () => {
    const out = (await run("filter", { expr: "amount >= $params.minAmount" })) as { id: number }[];
    assert.deepEqual(
      out.map((o) => o.id),
      [1, 3],
    );
  });

  it("filter treats one object as one record", async () => {
    assert.deepEqual(await run("filter", { expr: "amount > 100" }, orders[0]), [orders[0]]);
  });

  it("map adds and overwrites fields and keeps the others", async () => {
    const out = (await run("map", {
      fields: { total: "amount * qty", amount: "amount * (1 + $params.rate)" },
    })) as Record<string, unknown>[];
    assert.deepEqual(out[0], { ...orders[0], amount: 132, total: 240 });
    assert.equal(out.length, 4);
    assert.equal(out[3]?.customer, "ann");
  });

  it("map keeps shape for a single object", async () => {
    assert.deepEqual(await run("map", { fields: { big: "amount > 100" } }, orders[0]), {
      ...orders[0],
      big: true,
    });
  });

  it("select keeps only listed fields", async () => {
    const out = await run("select", { fields: ["id", "customer"] });
    assert.deepEqual((out as unknown[]).slice(0, 2), [
      { id: 1, customer: "ann" },
      { id: 2, customer: "bob" },
    ]);
  });

  it("rename renames in place", async () => {
    const out = (await run("rename", {
      mapping: { customer: "client", qty: "quantity" },
    })) as Record<string, unknown>[];
    assert.deepEqual(Object.keys(out[0] ?? {}), [
      "id",
      "client",
      "region",
      "amount",
      "quantity",
      "tags",
    ]);
  });

  it("sort by several keys, descending, missing last", async () => {
    const out = (await run("sort", {
      by: [{ field: "region" }, { field: "amount", asc: false }],
    })) as { id: number }[];
    assert.deepEqual(
      out.map((o) => o.id),
      [1, 3, 4, 2],
    );
    const withMissing = [{ n: 2 }, { n: null }, { n: 1 }];
    assert.deepEqual(await run("sort", { by: [{ field: "n", asc: false }] }, withMissing), [
      { n: 2 },
      { n: 1 },
      { n: null },
    ]);
  });

  it("limit with offset", async () => {
    const out = (await run("limit", { count: 2, offset: 1 })) as { id: number }[];
    assert.deepEqual(
      out.map((o) => o.id),
      [2, 3],
    );
  });

  it("distinct on fields keeps the first of each", async () => {
    const out = (await run("distinct", { fields: ["customer"] })) as { id: number }[];
    assert.deepEqual(
      out.map((o) => o.id),
      [1, 2, 3],
    );
    assert.deepEqual(await run("distinct", {}, [{ a: 1 }, { a: 1 }, { a: 2 }]), [
      { a: 1 },
      { a: 2 },
    ]);
  });

  it("aggregate by group with every metric", async () => {
    const out = await run("aggregate", {
      groupBy: ["region"],
      metrics: {
        n: { fn: "count" },
        revenue: { fn: "sum", field: "amount" },
        avgQty: { fn: "avg", field: "qty" },
        smallest: { fn: "min", field: "amount" },
        largest: { fn: "max", field: "amount" },
      },
    });
    assert.deepEqual(out, [
      { region: "eu", n: 2, revenue: 200, avgQty: 3.5, smallest: 80, largest: 120 },
      { region: "us", n: 2, revenue: 45.5, avgQty: 1, smallest: 0, largest: 45.5 },
    ]);
  });

  it("aggregate without groupBy is one group", async () => {
    assert.deepEqual(await run("aggregate", { metrics: { n: { fn: "count", field: "tags" } } }), [
      { n: 3 },
    ]);
  });

  it("flatten unnests an array field", async () => {
    const out = (await run("flatten", { field: "tags" })) as { id: number; tags: unknown }[];
    assert.deepEqual(
      out.map((o) => [o.id, o.tags]),
      [
        [1, "new"],
        [1, "vip"],
        [3, "vip"],
        [4, undefined],
      ],
    );
    assert.deepEqual(await run("flatten", {}, [[1, 2], [3], 4]), [1, 2, 3, 4]);
  });

  it("expr evaluates over the whole input", async () => {
    assert.equal(await run("expr", { expr: "$sum($[region='eu'].amount) * $params.rate" }), 20);
  });

  it("applyOperators chains in order", async () => {
    const out = await applyOperators(
      [
        { type: "filter", expr: "amount > 0" },
        { type: "map", fields: { total: "amount * qty" } },
        { type: "sort", by: [{ field: "total", asc: false }] },
        { type: "select", fields: ["id", "total"] },
        { type: "limit", count: 2 },
      ],
      orders,
      ctx,
    );
    assert.deepEqual(out, [
      { id: 3, total: 400 },
      { id: 1, total: 240 },
    ]);
  });
});
