import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { makeSessionCookie, signToken } from "../../src/auth/tokens.ts";
import { DF, deployAndActivate, NO_SCRIPT_FLOW } from "../helpers/flows.ts";
import { modeEnv, SCOPE, startServer, type TestServer } from "../helpers/server.ts";

const SECRETS = {
  AUTH_MODE: "signature",
  AUTH_APP_SECRETS: "app1=app-secret",
  AUTH_SESSION_SECRET: "session-secret",
};

/**
 * The answers behind test/console/cross-site.test.ts, without a browser: a state-changing request
 * whose credential is the session cookie and that a page of another origin sent is a 403 envelope
 * (docs/security.md, "The console and browsers"); the console, the CLI and token callers are not.
 */
describe("a request with the session cookie from another origin", () => {
  let server: TestServer;
  const session = `session=${makeSessionCookie(SECRETS.AUTH_SESSION_SECRET, SCOPE, Math.floor(Date.now() / 1000) + 3600)}`;
  const rotate = (headers: Record<string, string>) =>
    server.call("POST", `${DF}/webhook/secret/rotate`, { headers });
  const host = () => new URL(server.url).host;

  before(async () => {
    server = await startServer({ ...SECRETS, ...(await modeEnv()) });
    await deployAndActivate(server, "f", NO_SCRIPT_FLOW, {}, { cookie: session });
  });
  after(async () => server?.close());

  it("is refused with a 403 envelope when the browser says it came from another site or origin", async () => {
    const cases: Record<string, string>[] = [
      { "sec-fetch-site": "cross-site" },
      { "sec-fetch-site": "same-site" },
      { "sec-fetch-site": "cross-site", origin: `http://${host()}` },
      { origin: "http://127.0.0.1:1" },
      { origin: "null" },
    ];
    for (const headers of cases) {
      const r = await rotate({ cookie: session, ...headers });
      assert.equal(r.body.status, false, JSON.stringify(headers));
      assert.equal(r.body.code, 403, r.text);
      assert.match(r.body.message, /session cookie from a page of another origin/);
      assert.equal(r.body.data, null);
    }
    const run = await server.call("POST", `${DF}/run`, {
      headers: { cookie: session, "sec-fetch-site": "same-site", "content-type": "text/plain" },
      raw: JSON.stringify({ elementName: "f", parameter: { orders: [] } }),
    });
    assert.equal(run.body.code, 403, run.text);
  });

  it("is answered when it came from the service's own origin, or from no browser page", async () => {
    const cases: Record<string, string>[] = [
      { "sec-fetch-site": "same-origin", origin: `http://${host()}` },
      { "sec-fetch-site": "none" },
      { origin: `http://${host()}` },
      {},
    ];
    for (const headers of cases) {
      const r = await rotate({ cookie: session, ...headers });
      assert.equal(r.body.status, true, `${JSON.stringify(headers)}: ${r.text}`);
    }
    // Reads are not refused (another origin cannot read the answer), nor are token callers.
    const read = await server.call("GET", `${DF}/webhook/secret`, {
      headers: { cookie: session, "sec-fetch-site": "cross-site" },
    });
    assert.equal(read.body.status, true, read.text);
    const nowS = Math.floor(Date.now() / 1000);
    const token = await rotate({
      ...SCOPE,
      token: signToken("app-secret", SCOPE, nowS),
      "sec-fetch-site": "cross-site",
    });
    assert.equal(token.body.status, true, token.text);
  });

  it("every answer says nosniff and DENY (no framing)", async () => {
    for (const [method, path] of [
      ["GET", "/health"],
      ["GET", `${DF}/monitor/run?runId=nope`],
      ["GET", "/no-such-route"],
    ] as const) {
      const r = await server.call(method, path, { headers: { cookie: session } });
      assert.equal(r.headers.get("x-content-type-options"), "nosniff", path);
      assert.equal(r.headers.get("x-frame-options"), "DENY", path);
    }
  });
});
