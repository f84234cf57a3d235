import assert from "node:assert/strict";
import { describe, it } from "node:test";
import fc from "fast-check";
import { createEvaluator } from "../../src/flows/expr.ts";
import { isBounded } from "../../src/flows/expr-bounded.ts";

/**
 * The claim the service's own thread rests on (docs/security.md, "Flow expressions"): an
 * expression the allowlist calls bounded, evaluated there with JSONata's guardrails, ends soon
 * after the short limit and answers nothing much larger than its input, whatever it is built of.
 * Expressions are generated from a grammar that mixes what is allowed with what an attacker would
 * reach for (ranges, constructors, doubling, cross products, regular expressions, sorts, lambdas).
 */
const LIMIT_MS = 50;
const ev = createEvaluator({ timeoutMs: LIMIT_MS, depth: 200 });
const INPUT = {
  xs: Array.from({ length: 3000 }, (_, i) => i),
  big: {
    rows: Array.from({ length: 2000 }, (_, i) => ({ id: i, name: `row ${i}`, tags: ["a", "b"] })),
  },
  s: `${"a".repeat(40)}!`,
  n: 3,
};
const PARAMS = { k: Array.from({ length: 500 }, (_, i) => `p${i}`), min: 10 };
const INPUT_CHARS = JSON.stringify(INPUT).length + JSON.stringify(PARAMS).length;

const leaf = fc.constantFrom(
  "xs",
  "big",
  "big.rows",
  "s",
  "n",
  "$",
  "$$.xs",
  "$params.k",
  "$params.min",
  "1",
  "'x'",
  "true",
  "id",
  "name",
);
const BINARY = ["+", "-", "*", "%", "<", "=", "!=", "and", "or", "in", "&"];
const FUNCTIONS = [
  "sum",
  "count",
  "max",
  "length",
  "exists",
  "string",
  "join",
  "uppercase",
  "sort",
];
const { expr } = fc.letrec<{ expr: string }>((tie) => {
  const e = tie("expr");
  const weighted = (weight: number, arbitrary: fc.Arbitrary<string>) => ({ weight, arbitrary });
  return {
    expr: fc.oneof(
      { depthSize: "small", withCrossShrink: true },
      weighted(6, leaf),
      weighted(
        5,
        fc.tuple(e, fc.constantFrom(...BINARY), e).map(([a, op, b]) => `(${a} ${op} ${b})`),
      ),
      weighted(
        3,
        fc.tuple(e, e).map(([a, b]) => `${a}.${b}`),
      ),
      weighted(
        3,
        fc.tuple(e, e).map(([a, b]) => `${a}.(${b})`),
      ),
      weighted(
        3,
        fc.tuple(e, e).map(([a, b]) => `${a}[${b}]`),
      ),
      weighted(
        2,
        fc.tuple(e, e, e).map(([a, b, c]) => `(${a} ? ${b} : ${c})`),
      ),
      weighted(
        3,
        fc.tuple(fc.constantFrom(...FUNCTIONS), e).map(([f, a]) => `$${f}(${a})`),
      ),
      // What an attacker reaches for:
      weighted(
        1,
        e.map((a) => `{'a': ${a}, 'b': [${a}, ${a}]}`),
      ),
      weighted(
        1,
        e.map((a) => `$.(${a})${".{'d': [$, $]}".repeat(12)}`),
      ),
      weighted(
        1,
        e.map((a) => `${a}${".($ & $)".repeat(12)}`),
      ),
      weighted(
        1,
        fc.integer({ min: 1, max: 10_000_000 }).map((m) => `[1..${m}]`),
      ),
      weighted(1, fc.constant("$match(s, /(a+)+$/)")),
      // A picture's width: the string is written out in one native step (found by review).
      weighted(
        1,
        fc.integer({ min: 1, max: 100_000_000 }).map((m) => `$now('[Y,${m}]')`),
      ),
      weighted(
        1,
        e.map((a) => `( $f := function($i){ $i > 0 ? $f($i - 1) : ${a} }; $f(100000) )`),
      ),
      weighted(1, fc.constant("**.id")),
    ),
  };
});

/** Whether `value` written as JSON has at most `limit` characters, found without writing it. */
function jsonAtMost(value: unknown, limit: number): boolean {
  let left = limit;
  const walk = (v: unknown): boolean => {
    left -= typeof v === "string" ? v.length + 2 : 8;
    if (left < 0) return false;
    if (Array.isArray(v)) return v.every(walk);
    if (typeof v === "object" && v !== null)
      return Object.entries(v).every(([k, x]) => walk(k) && walk(x));
    return true;
  };
  return walk(value);
}

describe("bounded expressions, fuzzed", () => {
  it("end soon after the limit and answer no more than about their input", async () => {
    let bounded = 0;
    await fc.assert(
      fc.asyncProperty(expr, async (text) => {
        if (!isBounded(text)) return;
        bounded++;
        const started = performance.now();
        let value: unknown;
        try {
          value = await ev.evaluate(text, INPUT, PARAMS);
        } catch {
          value = undefined; // an error, or JSONata's own stop: both are an end
        }
        const ms = performance.now() - started;
        assert.ok(ms < LIMIT_MS + 1000, `${text} ran ${ms.toFixed(0)} ms`);
        assert.ok(
          jsonAtMost(value, 4 * INPUT_CHARS),
          `${text} answered a value larger than its input`,
        );
      }),
      { numRuns: 1000, seed: Number(process.env.FUZZ_SEED ?? Date.now() % 2 ** 31) },
    );
    assert.ok(bounded > 50, `only ${bounded} generated expressions were bounded`);
  });
});
