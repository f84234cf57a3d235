import assert from "node:assert/strict";
import { randomBytes } from "node:crypto";
import fs from "node:fs";
import { after, before, describe, it } from "node:test";
import fc from "fast-check";
import { ErrorCode } from "../../src/errors.ts";
import { isSecretName } from "../../src/secrets/refs.ts";
import { DF } from "../helpers/flows.ts";
import { scopeHeaders, startServer, TEST_MODE, type TestServer } from "../helpers/server.ts";

/**
 * docs/secrets.md, docs/errors.md: whatever name and body a caller sends to the secret endpoints,
 * the answer is an envelope (a 400 naming the field for bad input), never a crash or a 500, and
 * what is accepted is a valid name with a value that is stored as it was sent.
 */
const CATALOG = new Set<number>([0, ...Object.values(ErrorCode)]);
const h = scopeHeaders();

const names = fc.oneof(
  fc.stringMatching(/^[A-Za-z_][A-Za-z0-9_]{0,130}$/),
  fc.string({ unit: "binary", minLength: 1, maxLength: 20 }),
  fc.constantFrom("1abc", "a-b", "a.b", "a b", "..", "%", "A".repeat(129), "ÄÖ", "a\u0000b"),
);
const values = fc.oneof(
  fc.string({ unit: "binary", minLength: 0, maxLength: 40 }),
  fc.constantFrom("a\ud800b", "\udc00", "😀", "x".repeat(65_537), "x".repeat(65_536)),
  fc.jsonValue({ maxDepth: 2 }),
);
const bodies = fc.oneof(
  fc.record({ value: values }),
  fc.record({ value: values, extra: fc.jsonValue({ maxDepth: 1 }) }),
  fc.jsonValue({ maxDepth: 2 }),
  fc.constant(undefined),
);

describe(`secret endpoints under fuzzing (${TEST_MODE})`, () => {
  let server: TestServer;
  before(async () => {
    server = await startServer({ SECRETS_KEY: randomBytes(32).toString("base64") });
  });
  after(async () => {
    await server?.close().catch(() => undefined);
    if (server) fs.rmSync(server.dataDir, { recursive: true, force: true });
  });

  it("answers every request with an envelope, never a 500", async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.constantFrom("PUT", "GET", "DELETE"),
        names,
        bodies,
        async (method, name, body) => {
          const path = `${DF}/secret/${encodeURIComponent(name)}`;
          const r = await server.call(method, path, {
            headers: h,
            ...(body !== undefined && method === "PUT" ? { body } : {}),
          });
          assert.equal(r.status, 200, r.text);
          assert.equal(typeof r.body?.status, "boolean", r.text);
          assert.ok(CATALOG.has(r.body.code), r.text);
          if (r.body.code === 400) assert.match(r.body.message, /name|value|body|param/, r.text);
          if (method === "PUT" && r.body.status) {
            const sent = (body as { value: unknown }).value;
            assert.ok(isSecretName(name), `accepted name ${JSON.stringify(name)}`);
            assert.ok(typeof sent === "string" && sent.isWellFormed(), `accepted ${r.text}`);
          }
        },
      ),
      { numRuns: 300, seed: Number(process.env.FUZZ_SEED ?? 17) },
    );
  });

  it("takes every name the rules allow: 100 characters is the longest", async () => {
    const longest = `N${"a".repeat(99)}`;
    const put = await server.call("PUT", `${DF}/secret/${longest}`, {
      headers: h,
      body: { value: "v" },
    });
    assert.equal(put.body.status, true, put.text);
    const get = await server.call("GET", `${DF}/secret/${longest}`, { headers: h });
    assert.equal(get.body.data.name, longest, get.text);
    const del = await server.call("DELETE", `${DF}/secret/${longest}`, { headers: h });
    assert.equal(del.body.status, true, del.text);
    const over = await server.call("PUT", `${DF}/secret/${longest}b`, {
      headers: h,
      body: { value: "v" },
    });
    assert.deepEqual([over.body.status, over.body.code], [false, 400], over.text);
    // A name no endpoint can create is malformed in a flow too, not merely missing.
    const d = await server.call("POST", `${DF}/flow/deploy`, {
      headers: h,
      body: {
        elementName: "long",
        revisionName: "r1",
        flow: {
          vertexes: [
            { id: "in", type: "input" },
            {
              id: "call",
              type: "http",
              config: { url: `http://127.0.0.1:9/\${secret.${longest}b}` },
            },
            { id: "out", type: "output" },
          ],
          edges: [
            { source: "in", target: "call" },
            { source: "call", target: "out" },
          ],
        },
        configure: {},
      },
    });
    assert.match(d.text, /malformed secret reference/, d.text);
  });

  it("refuses a value that is not well-formed Unicode, naming it", async () => {
    const r = await server.call("PUT", `${DF}/secret/LONE`, {
      headers: h,
      body: { value: "ab\ud800cd" },
    });
    assert.deepEqual([r.status, r.body.status, r.body.code], [200, false, 400], r.text);
    assert.match(r.body.message, /body\.value/);
  });
});
