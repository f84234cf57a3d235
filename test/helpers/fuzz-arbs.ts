import { deflateSync, gzipSync } from "node:zlib";
import fc from "fast-check";

/**
 * Request generators for the fuzz suite, built from the service's own OpenAPI document (so a new
 * route or field is fuzzed without touching this file) plus a few real bodies per route to mutate
 * (so generated requests also get past validation into the lifecycle, runs and the runner).
 */

export type Json = null | boolean | number | string | Json[] | { [k: string]: Json };
export interface JsonSchema {
  type?: string | string[];
  properties?: Record<string, JsonSchema>;
  required?: string[];
  items?: JsonSchema;
  enum?: Json[];
  anyOf?: JsonSchema[];
  oneOf?: JsonSchema[];
  additionalProperties?: boolean | JsonSchema;
}
export interface Operation {
  method: string;
  path: string;
  params: { in: string; name: string; schema?: JsonSchema }[];
  body?: JsonSchema;
  multipart: boolean;
}

/** Strings that have broken parsers elsewhere: empty, huge-ish, escapes, traversal, numbers. */
const nasty = fc.constantFrom(
  "",
  " ",
  "null",
  "true",
  "0",
  "-1",
  "1e309",
  "9007199254740993",
  "../../etc/passwd",
  "/",
  "%",
  "%00",
  "\u0000",
  "\ud800",
  "😀",
  "a".repeat(300),
  "${date:yyyy}",
  "$$",
  "__proto__",
  "constructor",
  "' OR 1=1 --",
  "\\",
  "\r\n",
);
export const text = fc.oneof(
  fc.string({ maxLength: 12 }),
  fc.string({ unit: "binary", maxLength: 6 }),
  nasty,
);
const names = (pool: string[]) =>
  fc.oneof({ weight: 3, arbitrary: fc.constantFrom(...pool) }, { weight: 1, arbitrary: text });
const anyJson: fc.Arbitrary<Json> = fc.jsonValue({ maxDepth: 3 }) as fc.Arbitrary<Json>;

/** A value the schema accepts, most of the time; `pool` seeds string fields with real names. */
export function fromSchema(schema: JsonSchema, pool: string[], depth = 0): fc.Arbitrary<Json> {
  const alts = schema.anyOf ?? schema.oneOf;
  if (alts) return fc.oneof(...alts.map((s) => fromSchema(s, pool, depth + 1)));
  if (schema.enum) return fc.constantFrom(...schema.enum);
  const type = Array.isArray(schema.type) ? schema.type[0] : schema.type;
  switch (type) {
    case "string":
      return names(pool);
    case "integer":
      // Past what a column holds too: 2^31 (a PostgreSQL integer), 1e300 (an integer to a
      // schema, past a bigint); both were internal errors in cluster mode.
      return fc.oneof(
        fc.integer({ min: -2, max: 200 }),
        fc.constantFrom(0, 1, 2 ** 31, 2 ** 53 + 1, -(2 ** 40), 2 ** 63, 1e300, -1e300),
      );
    case "number":
      return fc.oneof(fc.double({ noNaN: true }), fc.integer());
    case "boolean":
      return fc.boolean();
    case "array":
      return depth > 3
        ? fc.constant([])
        : fc.array(fromSchema(schema.items ?? {}, pool, depth + 1), { maxLength: 3 });
    case "object":
      return objectFromSchema(schema, pool, depth);
    default:
      return anyJson;
  }
}

function objectFromSchema(schema: JsonSchema, pool: string[], depth: number): fc.Arbitrary<Json> {
  const props = schema.properties ?? {};
  if (depth > 3 || Object.keys(props).length === 0)
    return fc.dictionary(text, anyJson, { maxKeys: 2 });
  const record: Record<string, fc.Arbitrary<Json>> = {};
  for (const [k, s] of Object.entries(props)) record[k] = fromSchema(s, pool, depth + 1);
  return fc.record(record, {
    requiredKeys: (schema.required ?? []).filter((k) => k in props),
  }) as fc.Arbitrary<Json>;
}

/** One structural change somewhere in a JSON value: a field nulled, dropped, retyped or added. */
export function mutate(value: Json): fc.Arbitrary<Json> {
  const paths = jsonPaths(value);
  return fc
    .tuple(fc.constantFrom(...paths), fc.nat(3), anyJson, text)
    .map(([p, kind, replacement, key]) => edit(value, p, kind, replacement, key));
}

function jsonPaths(
  value: Json,
  prefix: (string | number)[] = [],
  out: (string | number)[][] = [],
): (string | number)[][] {
  out.push(prefix);
  if (out.length > 200) return out;
  if (Array.isArray(value)) {
    for (const [i, v] of value.entries()) jsonPaths(v, [...prefix, i], out);
  } else if (value && typeof value === "object")
    for (const [k, v] of Object.entries(value)) jsonPaths(v, [...prefix, k], out);
  return out;
}

function edit(
  value: Json,
  p: (string | number)[],
  kind: number,
  replacement: Json,
  key: string,
): Json {
  const copy = structuredClone(value);
  if (p.length === 0) return kind === 0 ? null : replacement;
  let parent: Json = copy;
  for (const k of p.slice(0, -1)) parent = (parent as Record<string | number, Json>)[k] as Json;
  const last = p[p.length - 1] as string | number;
  const holder = parent as Record<string | number, Json>;
  if (kind === 0) holder[last] = null;
  else if (kind === 1) {
    if (Array.isArray(holder)) holder.splice(last as number, 1);
    else delete holder[last];
  } else if (kind === 2) holder[last] = replacement;
  else {
    const target = holder[last];
    if (target && typeof target === "object" && !Array.isArray(target)) target[key] = replacement;
    else holder[last] = [replacement];
  }
  return copy;
}

/**
 * How the body's bytes go on the wire: encoding, and whether they are damaged on the way.
 * `plain` is the text the server should read (before any encoding) when nothing damaged it after
 * that: a byte that is not UTF-8 (a Latin-1 "ü", which Python's http.client sends for a `str`)
 * is put in before encoding, so that a server reading it as U+FFFD is caught (fuzz-run.ts).
 */
export const wireBody = (json: string) =>
  fc
    .record({
      encoding: fc.constantFrom(
        undefined,
        undefined,
        undefined,
        "gzip",
        "deflate",
        "identity",
        "br",
        "GZIP",
      ),
      damage: fc.constantFrom("none", "none", "none", "truncate", "flip", "append", "not-utf8"),
      at: fc.nat(),
    })
    .map(({ encoding, damage, at }) => {
      let bytes = Buffer.from(json);
      if (damage === "not-utf8") {
        const i = at % (bytes.length + 1);
        bytes = Buffer.concat([bytes.subarray(0, i), Buffer.from([0xfc]), bytes.subarray(i)]);
      }
      const plain = damage === "none" || damage === "not-utf8" ? bytes : undefined;
      if (encoding?.toLowerCase() === "gzip") bytes = gzipSync(bytes);
      if (encoding === "deflate") bytes = deflateSync(bytes);
      if (damage === "truncate") bytes = bytes.subarray(0, at % (bytes.length + 1));
      if (damage === "flip" && bytes.length > 0) {
        bytes = Buffer.from(bytes);
        bytes[at % bytes.length] = (bytes[at % bytes.length] ?? 0) ^ 0x5a;
      }
      if (damage === "append") bytes = Buffer.concat([bytes, Buffer.from("\u0000}{garbage")]);
      return { encoding, bytes, plain };
    });

export const contentTypes = fc.constantFrom(
  "application/json",
  "application/json",
  "application/json; charset=utf-8",
  "APPLICATION/JSON",
  "application/json; charset=latin1",
  "application/vnd.api+json",
  "application/problem+json; charset=utf-8",
  "text/plain",
  "application/x-www-form-urlencoded",
  "multipart/form-data",
  "application/octet-stream",
  "application/json, text/plain",
  ";;;",
  undefined,
);
