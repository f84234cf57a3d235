import assert from "node:assert/strict";
import { describe, it } from "node:test";
import fc from "fast-check";
import jsonata from "jsonata";
import { createEvaluator } from "../../src/flows/expr.ts";
import { compileFast, FALLBACK } from "../../src/flows/expr-fast.ts";

/**
 * The compiled functions of expr-fast.ts answer only where they know JSONata's answer: on
 * expressions and data generated from a grammar (fast and slow pieces mixed, fields of every JSON
 * type, missing, nested and in arrays), every answer they give is JSONata's, and where JSONata
 * fails they give none.
 */
const FIELDS = ["a", "b", "n", "s", "o", "o.x", "o.y.z", "arr", "`two words`", "$params.k"];
const leaf = fc.oneof(
  fc.constantFrom(...FIELDS),
  fc.integer({ min: -1000, max: 1000 }).map(String),
  fc.constantFrom("0", "1.5", "1e308", "'x'", "''", '"10"', "true", "false", "null"),
  // Not of the fast kind: each must make the whole expression JSONata's alone.
  fc.constantFrom("$", "arr[0]", "$count(arr)", "[1, 2]", "{'k': 1}", "o.*"),
);
const OPS = ["+", "-", "*", "/", "%", "<", "<=", ">", ">=", "=", "!=", "and", "or", "&", "in"];
const STAGES = ["[0]", "[1]", "[false]", "[true]", "[]", "{'k': 1}", "@$x", "#$i", "^(a)"];
const { expr } = fc.letrec<{ expr: string }>((tie) => ({
  expr: fc.oneof(
    { depthSize: "small", withCrossShrink: true },
    leaf,
    fc
      .tuple(tie("expr"), fc.constantFrom(...OPS), tie("expr"))
      .map(([l, op, r]) => `${l} ${op} ${r}`),
    tie("expr").map((e) => `(${e})`),
    tie("expr").map((e) => `-(${e})`),
    // A literal or parentheses followed by a stage JSONata applies to it: never of the fast kind.
    fc
      .tuple(
        fc.oneof(
          leaf,
          tie("expr").map((e) => `(${e})`),
        ),
        fc.constantFrom(...STAGES),
      )
      .map(([e, stage]) => `${e}${stage}`),
  ),
}));

const json = fc.oneof(
  fc.integer({ min: -5, max: 5 }),
  fc.double({ noNaN: true, noDefaultInfinity: true }),
  fc.constantFrom(0, -0, 1e308, -1e308, 0.1, 3),
  fc.string({ maxLength: 3 }),
  fc.constantFrom("", "10", "a", "b"),
  fc.boolean(),
  fc.constant(null),
  fc.array(fc.integer({ min: 0, max: 3 }), { maxLength: 2 }),
  fc.constant({ x: 1 }),
);
const record = fc.record(
  {
    a: json,
    b: json,
    n: json,
    s: json,
    o: fc.oneof(json, fc.record({ x: json, y: fc.oneof(json, fc.record({ z: json })) })),
    arr: json,
    "two words": json,
  },
  { requiredKeys: [] },
);
const params = fc.oneof(fc.record({ k: json }, { requiredKeys: [] }), json);

/** JSONata's answer, or its failure. */
async function jsonataOf(text: string, input: unknown, p: unknown) {
  try {
    return { value: await jsonata(text).evaluate(input, { params: p }) };
  } catch (err) {
    return { error: (err as Error).message };
  }
}

describe("JSONata's simplest expressions as plain functions", () => {
  it("answer as JSONata does wherever they answer, on generated expressions and data", async () => {
    let answered = 0;
    await fc.assert(
      fc.asyncProperty(expr, record, params, async (text, input, p) => {
        let ast: unknown;
        try {
          ast = jsonata(text).ast();
        } catch {
          return; // not JSONata
        }
        const fast = compileFast(ast);
        if (!fast) return;
        const mine = fast(input, p);
        if (mine === FALLBACK) return;
        answered++;
        const theirs = await jsonataOf(text, input, p);
        assert.ok(
          !("error" in theirs),
          `${text}: JSONata fails (${theirs.error}) where ${String(mine)} was answered`,
        );
        assert.deepEqual(mine, theirs.value, text);
        if (typeof mine === "number")
          assert.ok(Object.is(mine, theirs.value), `${text}: ${mine} vs ${theirs.value}`);
      }),
      { numRuns: 4000 },
    );
    // The property says little if almost nothing was answered.
    assert.ok(answered > 400, `only ${answered} answers of 4000`);
  });

  it("take the usual filters and mappings, and leave the rest to JSONata", () => {
    const row = { amount: 5, qty: 2, status: "open", tag: "a b" };
    const cases: [string, unknown][] = [
      ["amount > 0", true],
      ["amount * qty", 10],
      ["status = 'open' and amount >= 10", false],
      ["(amount - 1) / qty", 2],
      ["$params.min < amount", true],
      ["-amount", -5],
      ['status != "closed" or qty > 1', true],
    ];
    for (const [text, want] of cases) {
      const fast = compileFast(jsonata(text).ast());
      assert.ok(fast, `${text} compiled`);
      assert.equal(fast(row, { min: 1 }), want, text);
    }
    for (const text of ["orders", "amount * missing", "tag & 'x'", "$count(orders)", "orders[0]"]) {
      const fast = compileFast(jsonata(text).ast());
      assert.ok(!fast || fast({ ...row, orders: [1] }, {}) === FALLBACK, text);
    }
  });

  it("leave a literal or parentheses with a predicate or a group to JSONata", async () => {
    const cases: [string, unknown][] = [
      ["5[1]", undefined],
      ["'x'[1]", undefined],
      ["true[false]", undefined],
      ["null[1]", undefined],
      ["(a)[1]", undefined],
      ["(a > 0)[false]", undefined],
      ["(1 + 2)[1]", undefined],
      ["-(5)[1]", undefined],
      ["5{'k': 1}", { k: 1 }],
      ["(a){'k': 1}", { k: 1 }],
    ];
    for (const [text, want] of cases) {
      const theirs = await jsonata(text).evaluate({ a: 1 });
      assert.deepEqual(theirs === undefined ? theirs : JSON.parse(JSON.stringify(theirs)), want);
      const fast = compileFast(jsonata(text).ast());
      assert.ok(
        !fast || fast({ a: 1 }, {}) === FALLBACK,
        `${text} answered ${fast?.({ a: 1 }, {})}`,
      );
    }
  });

  it("fail past JSONata's nesting bound as JSONata does, and answer short of it", async () => {
    const depth = 40;
    const ev = createEvaluator({ timeoutMs: 5000, depth });
    for (let n = 1; n <= depth + 5; n++) {
      for (const text of [
        Array(n).fill("a").join(" + "),
        `${"-(".repeat(n)}a${")".repeat(n)}`,
        `${"(".repeat(n)}$params.k${")".repeat(n)} = 1`,
      ]) {
        const theirs = await jsonata(text, { timeout: 5000, stack: depth })
          .evaluate({ a: 1 }, { params: { k: 1 } })
          .then(
            (value: unknown) => ({ value }),
            (err: { code?: string }) => ({ code: err.code }),
          );
        const mine = await ev.evaluate(text, { a: 1 }, { k: 1 }).then(
          (value: unknown) => ({ value }),
          (err: { code?: string }) => ({ code: err.code }),
        );
        assert.deepEqual(mine, theirs, text);
      }
    }
  });
});
