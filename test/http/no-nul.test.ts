import assert from "node:assert/strict";
import { describe, it } from "node:test";
import fc from "fast-check";
import { nulIn } from "../../src/http/no-nul.ts";

/** The definition, written plainly: every step's path built on the way down. */
function reference(value: unknown, path: string): string | undefined {
  if (typeof value === "string") return value.includes("\0") ? path : undefined;
  if (value === null || typeof value !== "object") return undefined;
  if (Array.isArray(value)) {
    for (let i = 0; i < value.length; i++) {
      const found = reference(value[i], `${path}[${i}]`);
      if (found) return found;
    }
    return undefined;
  }
  for (const [k, v] of Object.entries(value)) {
    if (k.includes("\0")) return `${path} (a key)`;
    const found = reference(v, `${path}.${k}`);
    if (found) return found;
  }
  return undefined;
}

/** Strings that now and then hold U+0000, in values and in keys. */
const text = fc.oneof(fc.string({ maxLength: 6 }), fc.constantFrom("a\0b", "\0", "k\0"));
const json = fc.letrec((tie) => ({
  value: fc.oneof(
    { depthSize: "small" },
    text,
    fc.integer(),
    fc.boolean(),
    fc.constant(null),
    fc.array(tie("value"), { maxLength: 4 }),
    fc.dictionary(text, tie("value"), { maxKeys: 4 }),
  ),
})).value;

describe("the U+0000 check of request fields", () => {
  it("names the same first field as the plain definition, for any JSON value", () => {
    fc.assert(
      fc.property(json, (v) => {
        assert.equal(nulIn(v, "body"), reference(v, "body"));
      }),
      { numRuns: 2000 },
    );
  });

  it("names nested fields, array positions and keys", () => {
    assert.equal(nulIn({ a: [1, { b: "x\0" }] }, "body"), "body.a[1].b");
    assert.equal(nulIn({ a: { "k\0": 1 } }, "body"), "body.a (a key)");
    assert.equal(nulIn(["ok", { c: "fine" }], "body"), undefined);
  });
});
