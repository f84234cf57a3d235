import assert from "node:assert/strict";
import { describe, it } from "node:test";
import fc from "fast-check";
import {
  jsonPathAt,
  numberProblem,
  numbersToWalk,
  unsafeIntegerPath,
} from "../../src/schema/json-integers.ts";

/** A JSON value with some leaves replaced by integer literals the generator spells as text. */
type Tree = { text: string; paths: string[] };

const BIG = [
  "9007199254740992",
  "-9007199254740993",
  "1789012345678901234",
  "99999999999999999999",
];
const SAFE = [
  "9007199254740991",
  "-9007199254740991",
  "1234567890123456",
  "1e300",
  "-0",
  "12345678901234567.5",
  "1.0e16",
  "0.12345678901234567890",
  "1E+17",
  '"12345678901234567890"',
];

/**
 * fc.json() spells doubles as JSON.stringify does: 2^60 as its 19 digits, an integer literal past
 * the safe range (refused like any other). Those are left to BIG.
 */
const noLongInteger = (text: string): boolean => {
  let found = false;
  JSON.parse(text, (_key, value, context?: { source?: string }) => {
    if (
      typeof value === "number" &&
      !Number.isSafeInteger(value) &&
      /^-?\d+$/.test(context?.source ?? "")
    )
      found = true;
    return value;
  });
  return !found;
};

/** Trees spelled as text, with the paths of their unsafe integers in document order. */
const tree: fc.Arbitrary<Tree> = fc.letrec<{ node: Tree }>((tie) => ({
  node: fc.oneof(
    { depthSize: "small", withCrossShrink: true },
    fc.constantFrom(...BIG).map((t) => ({ text: t, paths: [""] })),
    fc
      .oneof(fc.constantFrom(...SAFE), fc.json().filter(noLongInteger))
      .map((t) => ({ text: t, paths: [] })),
    fc.array(tie("node"), { maxLength: 4 }).map((items) => ({
      text: `[${items.map((i) => i.text).join(", ")}]`,
      paths: items.flatMap((item, n) => item.paths.map((p) => `.${n}${p}`)),
    })),
    fc
      .uniqueArray(
        fc.tuple(
          fc.oneof(fc.string(), fc.constantFrom("a.b", "12345678901234567", '"', "\\")),
          tie("node"),
        ),
        {
          maxLength: 4,
          selector: ([k]) => k,
        },
      )
      .map((entries) => ({
        text: `{${entries.map(([k, v]) => `${JSON.stringify(k)} :${v.text}`).join(",")}}`,
        paths: entries.flatMap(([k, v]) => v.paths.map((p) => `.${k}${p}`)),
      })),
  ),
})).node;

describe("unsafeIntegerPath", () => {
  it("names the first integer past ±(2^53 − 1) by its path, and nothing else (property)", () => {
    fc.assert(
      fc.property(tree, ({ text, paths }) => {
        JSON.parse(text); // the generator spells valid JSON
        const first = paths[0];
        assert.equal(
          unsafeIntegerPath(text, "body"),
          first === undefined ? undefined : `body${first}`,
        );
      }),
      { numRuns: 5000 },
    );
  });

  it("costs about a parse on a body-sized text of long numbers, unsafe ones included", () => {
    // 10 MiB of 16-digit (safe) integers, one unsafe at the very end: every one is looked at.
    const count = Math.floor((10 * 1024 * 1024) / 17) - 1;
    const text = `[${"1234567890123456,".repeat(count)}9007199254740993]`;
    const time = (f: () => unknown) => {
      const start = performance.now();
      f();
      return performance.now() - start;
    };
    const parse = Math.min(
      time(() => JSON.parse(text)),
      time(() => JSON.parse(text)),
    );
    let path: string | undefined;
    const check = Math.min(...[0, 1].map(() => time(() => (path = unsafeIntegerPath(text)))));
    assert.equal(path, `body.${count}`);
    assert.ok(check < 5 * parse + 50, `check ${check.toFixed(0)} ms, parse ${parse.toFixed(0)} ms`);
  });

  it("a crafted text is no slower: deep nesting, a 10 MB number, a 10 MB string of escapes", () => {
    const deep = `${"[".repeat(100_000)}12345678901234567890${"]".repeat(100_000)}`;
    assert.equal(unsafeIntegerPath(deep), `body${".0".repeat(100_000)}`);
    assert.equal(unsafeIntegerPath(`[${"1".repeat(10_000_000)}]`), "body.0");
    assert.equal(unsafeIntegerPath(`[${"1".repeat(10_000_000)}.5]`), undefined);
    const escapes = JSON.stringify({ s: `${'\\"'.repeat(2_000_000)}12345678901234567890` });
    assert.equal(unsafeIntegerPath(escapes), undefined);
  });
});

describe("numberProblem and jsonPathAt", () => {
  const beyond = (path: string) =>
    `${path} is a number beyond ±1.8e308, which a double cannot hold; send it as a string`;
  it("names a number past a double's range, not one inside a string, nor a double as sent", () => {
    assert.equal(numberProblem('{"a":[1,{"b":-1e400}]}'), beyond("body.a.1.b"));
    assert.equal(numberProblem(`[${"9".repeat(309)}.5]`), beyond("body.0"));
    assert.equal(numberProblem('{"1e400":"1e400","x":1.7976931348623157e308}'), undefined);
    assert.equal(numberProblem("[1e-400, 1E+300, 12345678901234567.5]"), undefined);
    // Past the range with an exponent of two digits: 250 digits and e99 is 1e348.
    assert.equal(numberProblem(`{"a":1${"0".repeat(250)}e99}`), beyond("body.a"));
    assert.equal(numberProblem(`[-1${"0".repeat(250)}.5E+60]`), beyond("body.0"));
    assert.equal(numberProblem(`[1${"0".repeat(250)}e-99]`), undefined);
    assert.match(numberProblem("[1e999, 12345678901234567]") ?? "", /^body\.0 is a number beyond/);
    assert.match(
      numberProblem("[12345678901234567, 1e999]") ?? "",
      /^body\.0 is an integer beyond/,
    );
  });
  it("is no slower than a parse on a body of 308-digit numbers", () => {
    // A regular expression looking 309 digits ahead of each digit took 5 s on this text.
    const text = `[${`${"1".repeat(308)}.5,`.repeat(30_000)}1]`;
    const start = performance.now();
    assert.equal(numberProblem(text), undefined);
    const ms = performance.now() - start;
    const parse = performance.now();
    JSON.parse(text);
    assert.ok(ms < 10 * (performance.now() - parse) + 100, `${ms.toFixed(0)} ms`);
  });
  it("does not walk a body whose strings only look like numbers (node123, UUIDs)", () => {
    // "e123" inside a string (a node ID, about a third of random UUIDs) is no exponent, and a
    // run of 16 digits inside one (an order number sent as text) no integer: neither may cost a
    // walk of the whole body, which took as long as its parse, or twice as long.
    const item = (i: number) =>
      `{"node":"node${100 + (i % 900)}","uuid":"3f0e1234-5e67-4b89-a012-34e5678f9abc","order":"17890123456789${10000 + i}","amount":12.5}`;
    const text = `[${Array.from({ length: 100 }, (_, i) => item(i)).join(",")}]`;
    assert.equal(numbersToWalk(text), false);
    assert.equal(numberProblem(text), undefined);
    // A number is still found at the start, after whitespace, a colon, a comma or a bracket.
    for (const t of [
      "1e400",
      "[1,\n -1e400]",
      '{"a":1E+400}',
      `[${"9".repeat(17)}]`,
      `{"n":"x","m":-2.5e999}`,
    ]) {
      assert.equal(numbersToWalk(t), true, t);
      assert.notEqual(numberProblem(t), undefined, t);
    }
  });
  it("names the value or key open at an offset", () => {
    const text = '{"a":{"bc":"xyz","d":["p","q"]}}';
    assert.equal(jsonPathAt(text, text.indexOf("y")), "body.a.bc");
    assert.equal(jsonPathAt(text, text.indexOf("q")), "body.a.d.1");
    assert.equal(jsonPathAt(text, text.indexOf("c")), "body.a (a key)");
    assert.equal(jsonPathAt('"abc"', 2), "body");
  });
});
