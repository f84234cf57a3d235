import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { isBounded } from "../../src/flows/expr-bounded.ts";

describe("bounded expressions (evaluated on the service's thread)", () => {
  it("take paths, filters, arithmetic, comparisons and functions that answer a number", () => {
    for (const text of [
      "orders",
      "amount > 0",
      "amount * qty",
      "(a + b) / 2",
      "-amount",
      "status = 'open' and $not(deleted = true)",
      "orders[amount > $params.min and region in $$.regions].amount",
      "$sum(orders.(amount * qty))",
      "a ? b : c",
      "$$.items[0]",
      "$params.limit",
      "$count(items) + $abs(n)",
      "$millis() - $params.since",
      "$now()",
      "status != null and 'x' in tags",
      "*.price",
      "$exists(a.b.c)",
    ])
      assert.equal(isBounded(text), true, text);
  });

  it("refuse what one step can make long or large, and code the expression defines", () => {
    for (const text of [
      "/a+/", // a regular expression
      "$match(s, /(a+)+$/)",
      "[1..1000000]", // a range
      "$sort(items)",
      "$distinct(items)",
      "$pad('', 100000000)",
      "$replace(s, 'a', 'b')",
      "$eval(code)",
      "$toMillis(s, '[Y]')",
      "$string(x)",
      "$join(xs, sep)",
      "$uppercase(name)",
      "first & ' ' & last", // a string that doubles step after step: s.($ & $).($ & $)…
      "{'total': amount * qty}", // a structure that doubles: $.{'a': [$, $]}.{'a': [$, $]}…
      "[a, b]",
      "orders{customer: $sum(amount)}", // a group-by constructs an object
      "xs.($$.big)", // the same part of the input for every item
      "xs.(ys.($params.big))",
      "xs.$count($$.big)",
      "$x := 1",
      "function($v){ $v }",
      "( $f := function($i){ $f($i) }; $f(0) )",
      "items ~> $count",
      "items^(price)",
      "**.price",
      "%.id",
      "items#$i[$i > 2]",
      "$map(items, $string)",
      "$y",
      "$sum",
      "| $ | {'a': 1} |",
      "not valid (",
    ])
      assert.equal(isBounded(text), false, text);
  });

  it("refuse one native step that costs more than the input (found by review, measured)", () => {
    for (const text of [
      // $now formats its picture: a width of 5e7 writes 50 MB from a 20-character expression,
      // and $length of it (an array of characters) held the thread 4 s (775 MB).
      "$now('[Y,50000000]')",
      "$length($now('[Y,50000000]'))",
      "$millis(x)",
      // $length makes an array of the string's characters: 0.8 s for a 9 MB string.
      "$length(name)",
      // Equality of two objects sorts both key lists: 1.1 s for two of 400 000 keys (10 MB),
      // and once per pair over a sequence that repeats them (a map of $params.a, $params.b).
      "a = b",
      "$.x != $.y",
      "orders[total = $params.total]",
    ])
      assert.equal(isBounded(text), false, text);
  });
});
