import assert from "node:assert/strict";
import { randomBytes } from "node:crypto";
import { after, before, describe, it } from "node:test";
import { deflateSync, gzipSync } from "node:zlib";
import { type RawAnswer, rawRequest } from "../helpers/raw-http.ts";
import { scopeHeaders, startServer, type TestServer, upload } from "../helpers/server.ts";

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
    expectEnvelope(r, 400, /headers app, space are required/);
  });
  it("health answers at the root", async () => {
    const r = await server.call("GET", "/health");
    assert.equal(r.body.status, "ok");
  });

  // Regressions found by the fuzz suite (test/http/fuzz.test.ts) and the attacks of issue 11.
  const port = () => Number(new URL(server.url).port);
  const envelopeOf = (a: RawAnswer) => {
    assert.equal(a.timedOut, false, "answered in time");
    assert.equal(a.closedEarly, false, "a whole answer before the close");
    return { status: a.status, body: JSON.parse(a.body.toString()) };
  };
  const head = (path: string, headers: Record<string, string>) =>
    `POST ${path} HTTP/1.1\r\nhost: 127.0.0.1\r\n${Object.entries(headers)
      .map(([k, v]) => `${k}: ${v}\r\n`)
      .join("")}\r\n`;

  it("a deflate body that errors after its 413 does not end the process", async () => {
    // The inflater kept being fed after the parser gave up; its later error had no listener.
    const big = JSON.stringify({ list: "a".repeat(200_000) + randomBytes(20_000).toString("hex") });
    for (const [encoding, packed] of [
      ["deflate", deflateSync(big)],
      ["gzip", gzipSync(big)],
    ] as const) {
      const truncated = packed.subarray(0, packed.length - 10);
      const r = await server.call("POST", "/dataflow-3-0/flow/batch-deploy", {
        headers: { ...h, "content-type": "application/json", "content-encoding": encoding },
        raw: truncated,
      });
      expectEnvelope(r, 413);
    }
    const health = await server.call("GET", "/health");
    assert.equal(health.body.status, "ok");
  });
  it("a client that sends its whole oversized body before reading gets the 413", async () => {
    for (const framing of ["content-length", "chunked"]) {
      const body = Buffer.alloc(3 * 1024 * 1024, 0x61);
      const headers: Record<string, string> = { ...h, "content-type": "application/json" };
      if (framing === "chunked") headers["transfer-encoding"] = "chunked";
      else headers["content-length"] = String(body.length);
      const wire =
        framing === "chunked"
          ? Buffer.concat([
              Buffer.from(`${body.length.toString(16)}\r\n`),
              body,
              Buffer.from("\r\n0\r\n\r\n"),
            ])
          : body;
      const a = await rawRequest(port(), head("/script/script/run", headers), wire, 10_000);
      expectEnvelope(envelopeOf(a), 413);
    }
  });
  it("a malformed multipart form is a 400 naming the form", async () => {
    const a = await rawRequest(
      port(),
      head("/script/file/batch-upload", {
        ...h,
        "content-type": "multipart/form-data; boundary=zz",
        "content-length": "1",
      }),
      Buffer.from("-"),
      10_000,
    );
    expectEnvelope(envelopeOf(a), 400, /multipart/);
  });
  it("a request Node's parser rejects still gets an envelope", async () => {
    const a = await rawRequest(
      port(),
      head("/script/script/run", { app: "a\u0000b", "content-length": "0" }),
      Buffer.alloc(0),
      10_000,
    );
    expectEnvelope(envelopeOf(a), 400, /malformed HTTP request/);
    const noHost = await rawRequest(
      port(),
      "GET /health HTTP/1.1\r\n\r\n",
      Buffer.alloc(0),
      10_000,
    );
    expectEnvelope(envelopeOf(noHost), 400, /Host/);
  });
  it("a path parameter past the router's bound is a 400 naming it, without the whole URL", async () => {
    const long = "a".repeat(5000);
    const r = await server.call("GET", `/script/script/result/${long}`, { headers: h });
    expectEnvelope(
      r,
      400,
      /^invalid request: params: a path parameter is longer than 3072 characters \(URL-encoded\)$/,
    );
  });
  it("an Expect other than 100-continue gets an envelope naming it, not Node's bare 417", async () => {
    const a = await rawRequest(
      port(),
      head("/script/script/run", {
        ...h,
        "content-type": "application/json",
        "content-length": "2",
        expect: "200-ok",
      }),
      Buffer.from("{}"),
      10_000,
    );
    expectEnvelope(
      envelopeOf(a),
      400,
      /^invalid request: unsupported Expect header "200-ok"; only 100-continue is understood$/,
    );
    assert.equal(a.headers.connection, "close");
    // 100-continue itself is answered as always: the interim 100, then the request's answer.
    const go = await rawRequest(
      port(),
      head("/script/external/nowhere/run", {
        ...h,
        "content-type": "application/json",
        "content-length": "2",
        expect: "100-continue",
      }),
      Buffer.from("{}"),
      10_000,
    );
    assert.equal(go.status, 100);
  });
});

describe("U+0000 in a field (PostgreSQL cannot keep it)", () => {
  it("is a 400 naming the field, in a path, a query string, a body and a form", async () => {
    const server = await startServer();
    try {
      const h = scopeHeaders();
      const expect400 = (r: { body: { code: number; message: string } }, field: RegExp) => {
        assert.equal(r.body.code, 400);
        assert.match(r.body.message, field);
        assert.match(r.body.message, /NUL/);
      };
      expect400(await server.call("GET", "/script/script/lifespan/%00", { headers: h }), /params/);
      expect400(
        await server.call("GET", "/dataflow-3-0/monitor/run?runId=a%00b", { headers: h }),
        /querystring/,
      );
      expect400(
        await server.call("POST", "/script/script/run", {
          headers: h,
          body: { elementName: "x", parameter: { note: "a\u0000b" } },
        }),
        /body\.parameter\.note/,
      );
      const r = await upload(server, [{ name: "a.py", content: "x = 1\n" }], { path: "/a\u0000" });
      expect400(r, /path/);
    } finally {
      await server.close();
    }
  });
});

describe("signature mode: an app named after an Object.prototype key", () => {
  it("is a 401, not an internal error", async () => {
    const server = await startServer({ AUTH_MODE: "signature", AUTH_APP_SECRETS: "app1=k" });
    try {
      for (const app of ["__proto__", "constructor", "toString"]) {
        const r = await server.call("POST", "/dataflow-3-0/run", {
          headers: { app, space: "s", user: "u", token: `${Math.floor(Date.now() / 1000)}.00` },
          body: { elementName: "x" },
        });
        assert.deepEqual([r.body.code, r.body.message], [401, "UNAUTHORIZED"]);
      }
    } finally {
      await server.close();
    }
  });
});
