import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { makeSessionCookie, signToken } from "../../src/auth/tokens.ts";
import { mintToken } from "../../src/cli.ts";
import { SCOPE, startServer, type TestServer, upload } from "../helpers/server.ts";

const ENV = {
  AUTH_MODE: "signature",
  AUTH_APP_SECRETS: "app1=s3cret,app2=other",
  AUTH_INTERNAL_SECRET: "internal-k",
  AUTH_SESSION_SECRET: "session-k",
};

describe("signature mode", () => {
  let server: TestServer;
  const now = () => Math.floor(Date.now() / 1000);
  const appToken = (t = now()) => ({ ...SCOPE, token: signToken("s3cret", SCOPE, t) });
  const internalToken = () => ({ ...SCOPE, token: signToken("internal-k", SCOPE, now()) });
  const cookie = (exp = now() + 600) => ({
    cookie: `session=${makeSessionCookie("session-k", SCOPE, exp)}`,
  });

  before(async () => {
    server = await startServer(ENV);
    const r = await upload(
      server,
      [{ name: "echo.py", content: "def main(p): return p\n" }],
      { path: "/" },
      internalToken(),
    );
    assert.equal(r.body.data[0].status, 0);
  });
  after(() => server.close());

  const run = (headers: Record<string, string>) =>
    server.call("POST", "/script/external/echo/run-sync", { headers, body: { ok: 1 } });
  const unauthorized = (r: { body: { status: boolean; code: number; message: string } }) =>
    assert.deepEqual([r.body.status, r.body.code, r.body.message], [false, 401, "UNAUTHORIZED"]);

  it("accepts a valid app token on external endpoints", async () => {
    assert.deepEqual((await run(appToken())).body, { ok: 1 });
  });
  it("rejects no token, a wrong signature, an expired token and another app's secret", async () => {
    unauthorized(await run({ ...SCOPE }));
    unauthorized(await run({ ...SCOPE, token: `${now()}.deadbeef` }));
    unauthorized(await run(appToken(now() - 301)));
    unauthorized(await run({ ...SCOPE, token: signToken("other", SCOPE, now()) }));
  });
  it("checks auth before body validation", async () => {
    const r = await server.call("POST", "/script/script/run", {
      headers: { ...SCOPE },
      body: { wrong: true },
    });
    unauthorized(r);
  });
  it("internal endpoints take only internal-secret tokens", async () => {
    const body = { elementName: "echo", parameter: { i: 1 } };
    unauthorized(
      await server.call("POST", "/script/script/run-sync", { headers: appToken(), body }),
    );
    unauthorized(
      await server.call("POST", "/script/script/run-sync", {
        headers: { ...SCOPE, ...cookie() },
        body,
      }),
    );
    const r = await server.call("POST", "/script/script/run-sync", {
      headers: internalToken(),
      body,
    });
    assert.deepEqual(r.body.data, { i: 1 });
  });
  it("script version endpoints take only internal-secret tokens; revision endpoints app tokens", async () => {
    const page = { elementName: "echo", path: "/", pageNo: 0, pageSize: 10 };
    for (const headers of [appToken(), { ...SCOPE, ...cookie() }])
      unauthorized(
        await server.call("POST", "/script/script/element/versions", { headers, body: page }),
      );
    const versions = await server.call("POST", "/script/script/element/versions", {
      headers: internalToken(),
      body: page,
    });
    assert.equal(versions.body.data.items[0].version, 1, versions.text);
    const one = await server.call("POST", "/script/script/element/version", {
      headers: internalToken(),
      body: { elementName: "echo", path: "/" },
    });
    assert.equal(one.body.data.source, "def main(p): return p\n");
    // The flow endpoints take app tokens and cookies: an unknown flow, not a 401.
    for (const headers of [appToken(), { ...SCOPE, ...cookie() }]) {
      const r = await server.call("POST", "/dataflow-3-0/flow/revisions", {
        headers,
        body: { elementName: "nope", pageNo: 0, pageSize: 10 },
      });
      assert.equal(r.body.code, 28010001, r.text);
    }
    unauthorized(
      await server.call("POST", "/dataflow-3-0/flow/revisions", {
        headers: { ...SCOPE },
        body: { elementName: "nope", pageNo: 0, pageSize: 10 },
      }),
    );
  });
  it("the session cookie supplies the scope; disagreeing headers and expired cookies are 401", async () => {
    assert.deepEqual((await run(cookie())).body, { ok: 1 });
    unauthorized(await run({ ...cookie(), app: "app1", space: "other", user: "alice" }));
    unauthorized(await run(cookie(now() - 10)));
  });
  it("result lookups accept app tokens, internal tokens and cookies", async () => {
    const r = await server.call("POST", "/script/external/echo/run", {
      headers: appToken(),
      body: { n: 1 },
    });
    const id = r.body.data;
    for (const headers of [appToken(), internalToken(), cookie()]) {
      const res = await server.call("GET", `/script/script/result/${id}?timeout=5`, { headers });
      assert.deepEqual(res.body.data, { n: 1 });
    }
  });
  it("the CLI mints a token and a cookie the server accepts", async () => {
    const out = mintToken(["--app", "app1", "--space", "space1", "--user", "alice"], ENV);
    const token = /token: (\S+)/.exec(out)?.[1] ?? "";
    const session = /cookie: (session=\S+)/.exec(out)?.[1] ?? "";
    assert.deepEqual((await run({ ...SCOPE, token })).body, { ok: 1 });
    assert.deepEqual((await run({ cookie: session })).body, { ok: 1 });
  });
});
