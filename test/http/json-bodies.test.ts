import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { deflateSync, gzipSync } from "node:zlib";
import { DF, deployAndActivate } from "../helpers/flows.ts";
import { scopeHeaders, startServer, type TestServer, upload } from "../helpers/server.ts";

/**
 * A JSON body is read as the caller wrote it, or refused naming why (docs/errors.md, "How fields
 * are read"); nothing is silently taken as another value. Each case here once was:
 * - a body that is not UTF-8 (Python's http.client encodes a `str` body as Latin-1; Java's
 *   `StringEntity(json)` too) had every byte outside ASCII replaced by U+FFFD: "Müller" ran as
 *   "M�ller";
 * - a charset named in content-type (`; charset=iso-8859-1`) was not read;
 * - `text/plain` (an HTML form's `enctype`, fetch's default for a string) was read as a string:
 *   an external run took the text as its parameter, other routes answered `body must be object`;
 * - a number past a double's range (`1e400`) ran as `null`;
 * - a gzip body without a content-type was dropped unread: the run went on with `{}` (found by
 *   the fuzz suite's echo property).
 */

const FLOW = {
  vertexes: [
    { id: "in", type: "input", config: { schema: { type: "object" } } },
    { id: "out", type: "output" },
  ],
  edges: [{ source: "in", target: "out" }],
};
const latin1 = (s: string) => Buffer.from(s, "latin1");

describe("JSON bodies are read as sent, or refused naming why", () => {
  let server: TestServer;
  const h = scopeHeaders();
  const post = (url: string, raw: string | Buffer, type = "application/json") =>
    server.call("POST", url, { headers: { ...h, "content-type": type }, raw });
  const refused = (
    r: { text: string; body: { code: number; message: string } },
    detail: string,
  ) => {
    assert.equal(r.body.code, 400, r.text);
    assert.equal(r.body.message, `invalid request: ${detail}`);
  };
  const stored = () => server.services.store.storedBytes(h.app);

  before(async () => {
    server = await startServer();
    await deployAndActivate(server, "bodies", FLOW);
    const u = await upload(server, [{ name: "echo.py", content: "def main(p):\n    return p\n" }], {
      path: "/bodies",
    });
    assert.equal(u.body.status, true, u.text);
  });
  after(() => server.close());

  it("a body that is not UTF-8 is a 400 naming the field, not U+FFFD in its place", async () => {
    const body = latin1('{"elementName":"bodies","parameter":{"customer":{"name":"Müller"}}}');
    refused(
      await post(`${DF}/run-sync`, body),
      "body.parameter.customer.name is not valid UTF-8 (byte 0xfc at offset 58); send JSON as UTF-8, or name its charset in content-type",
    );
    refused(
      await post("/script/external/echo/run-sync", latin1('{"Straße":1}')),
      "body (a key) is not valid UTF-8 (byte 0xdf at offset 6); send JSON as UTF-8, or name its charset in content-type",
    );
    // A key before the byte that no parser would take (a bad escape, a tab): the bytes are
    // still what is wrong, not the key read on its own (its parser's place was in the key).
    for (const key of ['"a\\q"', '"a\tb"']) {
      refused(
        await post("/script/external/echo/run-sync", latin1(`{"x":1,${key}:"ü"}`)),
        "body is not valid UTF-8 (byte 0xfc at offset 14); send JSON as UTF-8, or name its charset in content-type",
      );
    }
    // A sequence cut short, an overlong form, an encoded surrogate: none is UTF-8.
    for (const bad of [[0xc3], [0xc0, 0xaf], [0xed, 0xa0, 0x80]]) {
      const raw = Buffer.concat([Buffer.from('["ok","'), Buffer.from(bad), Buffer.from('"]')]);
      const r = await post("/script/external/echo/run-sync", raw);
      assert.equal(r.body.code, 400, `${bad}: ${r.text}`);
      assert.match(r.body.message, /^invalid request: body\.1 is not valid UTF-8 \(byte 0x/);
    }
  });

  it("a charset named in content-type is read; an unknown one is refused", async () => {
    const r = await post(
      "/script/external/echo/run-sync",
      latin1('{"name":"Müller","city":"Zürich"}'),
      "application/json; charset=ISO-8859-1",
    );
    assert.equal(r.headers.get("x-task-status"), "SUCCESS", r.text);
    assert.deepEqual(r.body, { name: "Müller", city: "Zürich" });
    const utf16 = Buffer.from('\ufeff{"name":"Müller"}', "utf16le");
    const u = await post(
      "/script/external/echo/run-sync",
      utf16,
      "application/json;charset=utf-16",
    );
    assert.deepEqual(u.body, { name: "Müller" }, u.text);
    // The usual names of UTF-8, in any case, with or without quotes and spaces.
    for (const type of [
      "application/json;charset=UTF-8",
      'application/json; charset="utf-8"',
      "Application/JSON; Charset=utf8",
    ]) {
      const ok = await post("/script/external/echo/run-sync", '{"name":"Müller"}', type);
      assert.deepEqual(ok.body, { name: "Müller" }, `${type}: ${ok.text}`);
    }
    refused(
      await post("/script/external/echo/run-sync", "{}", "application/json; charset=klingon"),
      'unsupported charset "klingon" in content-type; JSON is UTF-8',
    );
  });

  // RFC 6839's structured suffix: JSON:API clients send application/vnd.api+json, others
  // application/problem+json or a vendor type of their own. Before, each was refused.
  it("a +json media type is JSON, with its charset read like application/json's", async () => {
    for (const type of [
      "application/vnd.api+json",
      "application/problem+json; charset=utf-8",
      "Application/Vnd.Acme.Order-V2+JSON",
    ]) {
      const r = await post("/script/external/echo/run-sync", '{"a":"Müller"}', type);
      assert.deepEqual(r.body, { a: "Müller" }, `${type}: ${r.text}`);
    }
    const latin = await post(
      "/script/external/echo/run-sync",
      latin1('{"a":"Müller"}'),
      "application/vnd.api+json;charset=iso-8859-1",
    );
    assert.deepEqual(latin.body, { a: "Müller" }, latin.text);
    // Not a suffix: still refused.
    refused(
      await post("/script/external/echo/run-sync", "{}", "application/json-seq"),
      'unsupported content type "application/json-seq"; bodies are application/json (uploads multipart/form-data)',
    );
  });

  it("text/plain is an unsupported content type, on every route, whatever the body", async () => {
    const before = await stored();
    const detail = (type: string) =>
      `unsupported content type ${JSON.stringify(type)}; bodies are application/json (uploads multipart/form-data)`;
    for (const type of ["text/plain", "text/plain;charset=UTF-8"]) {
      refused(await post("/script/external/echo/run-sync", "hello", type), detail(type));
      refused(await post("/script/external/echo/run", '{"a":1}', type), detail(type));
      refused(
        await post(`${DF}/run`, '{"elementName":"bodies","parameter":{}}', type),
        detail(type),
      );
    }
    assert.equal(await stored(), before);
  });

  it("a body without a content-type is refused, compressed or not; none is read as {}", async () => {
    const detail =
      "a body needs a content-type; bodies are application/json (uploads multipart/form-data)";
    const before = await stored();
    const body = '{"name":"Müller"}';
    for (const [encoding, bytes] of [
      [undefined, Buffer.from(body)],
      ["gzip", gzipSync(body)],
      ["deflate", deflateSync(body)],
    ] as const) {
      const headers: Record<string, string> = { ...h };
      if (encoding) headers["content-encoding"] = encoding;
      const r = await server.call("POST", "/script/external/echo/run-sync", {
        headers,
        raw: bytes,
      });
      refused(r, detail);
    }
    assert.equal(await stored(), before);
    // With its type, the same gzip body is read.
    const r = await server.call("POST", "/script/external/echo/run-sync", {
      headers: { ...h, "content-type": "application/json", "content-encoding": "gzip" },
      raw: gzipSync(body),
    });
    assert.deepEqual(r.body, { name: "Müller" }, r.text);
  });

  it("a number past the range of a double is a 400 naming it, not null", async () => {
    refused(
      await post(`${DF}/run-sync`, '{"elementName":"bodies","parameter":{"limits":[1,1e400]}}'),
      "body.parameter.limits.1 is a number beyond ±1.8e308, which a double cannot hold; send it as a string",
    );
    refused(
      await post("/script/external/echo/run-sync", `-${"9".repeat(400)}.5`),
      "body is a number beyond ±1.8e308, which a double cannot hold; send it as a string",
    );
    // The largest double, the smallest, and one that rounds to 0 are doubles as sent.
    const r = await post(
      "/script/external/echo/run-sync",
      "[1.7976931348623157e308,5e-324,1e-400]",
    );
    assert.deepEqual(r.body, [1.7976931348623157e308, 5e-324, 0], r.text);
  });
});
