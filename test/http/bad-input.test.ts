import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { scopeHeaders, startServer, type TestServer } from "../helpers/server.ts";

describe("bad input gets a clear envelope", () => {
  let server: TestServer;
  const h = scopeHeaders();
  before(async () => {
    server = await startServer({ LIMIT_BODY_BYTES: "1024" });
  });
  after(() => server.close());

  const expectEnvelope = (
    r: { status: number; body: { status: boolean; code: number; message: string; data: unknown } },
    code: number,
    pattern?: RegExp,
  ) => {
    assert.equal(r.status, 200);
    assert.deepEqual([r.body.status, r.body.code, r.body.data], [false, code, null]);
    if (pattern) assert.match(r.body.message, pattern);
  };

  it("malformed JSON", async () => {
    const r = await server.call("POST", "/script/script/run", {
      headers: { ...h, "content-type": "application/json" },
      raw: '{"elementName": ',
    });
    expectEnvelope(r, 400, /not valid JSON/);
  });
  it("wrong field type names the field", async () => {
    const r = await server.call("POST", "/script/script/run-sync", {
      headers: h,
      body: { elementName: "x", timeout: "soon" },
    });
    expectEnvelope(r, 400, /timeout/);
    const q = await server.call("POST", "/script/external/x/run-sync?timeout=abc", {
      headers: h,
      body: {},
    });
    expectEnvelope(q, 400, /querystring\.timeout/);
  });
  it("oversize body is 413", async () => {
    const r = await server.call("POST", "/script/script/run", {
      headers: h,
      body: { elementName: "x", parameter: "y".repeat(5000) },
    });
    expectEnvelope(r, 413);
  });
  it("gzip that inflates past the limit is 413; broken gzip is 400", async () => {
    const { gzipSync } = await import("node:zlib");
    const bomb = gzipSync(
      Buffer.from(JSON.stringify({ elementName: "x", parameter: "z".repeat(100_000) })),
    );
    const r = await server.call("POST", "/script/script/run", {
      headers: { ...h, "content-type": "application/json", "content-encoding": "gzip" },
      raw: bomb,
    });
    expectEnvelope(r, 413);
    const broken = await server.call("POST", "/script/script/run", {
      headers: { ...h, "content-type": "application/json", "content-encoding": "gzip" },
      raw: "nope",
    });
    expectEnvelope(broken, 400);
  });
  it("unsupported content type is 400", async () => {
    const r = await server.call("POST", "/script/script/run", {
      headers: { ...h, "content-type": "text/csv" },
      raw: "a,b",
    });
    expectEnvelope(r, 400, /content type/);
  });
  it("unknown route is a 404 envelope", async () => {
    expectEnvelope(await server.call("GET", "/script/nowhere", { headers: h }), 404, /nowhere/);
  });
  it("bad URL encoding is 400", async () => {
    expectEnvelope(await server.call("GET", "/script/script/result/%E0%A4%A", { headers: h }), 400);
  });
  it("missing scope headers on a script endpoint are 400 naming the header", async () => {
    const r = await server.call("POST", "/script/script/run", { body: { elementName: "x" } });
    expectEnvelope(r, 400, /header app/);
  });
  it("health answers at the root", async () => {
    const r = await server.call("GET", "/health");
    assert.equal(r.body.status, "ok");
  });
});
