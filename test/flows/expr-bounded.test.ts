import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { isBounded } from "../../src/flows/expr-bounded.ts";

describe("bounded expressions (evaluated on the service's thread)", () => {
  it("take paths, filters, arithmetic, constructors and one-pass functions", () => {
    for (const text of [
      "orders",
      "amount > 0",
      "amount * qty",
      "(a + b) / 2",
      "-amount",
      "orders[amount > $params.min].{ 'total': amount * qty }",
      "orders{customer: $sum(amount)}",
      "a ? b : c",
      "$$.items[0]",
      "$uppercase(name) & ' ' & $string(id)",
      "[a, b, {'c': $count(items)}]",
      "$join($split(text, ','), ';')",
      "*.price",
    ])
      assert.equal(isBounded(text), true, text);
  });

  it("refuse what one step can make long, and code the expression defines", () => {
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
});
