import assert from "node:assert/strict";
import http from "node:http";
import type { AddressInfo } from "node:net";
import { after, before, describe, it } from "node:test";
import { type Browser, type BrowserContext, chromium, type Page } from "playwright-core";
import { makeSessionCookie } from "../../src/auth/tokens.ts";
import { assertConsoleReady } from "../helpers/console-page.ts";
import { DF, deployAndActivate, NO_SCRIPT_FLOW } from "../helpers/flows.ts";
import { SCOPE, startServer, type TestServer } from "../helpers/server.ts";

const FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--no-first-run"];
const SECRETS = {
  AUTH_MODE: "signature",
  AUTH_APP_SECRETS: "app1=app-secret",
  AUTH_SESSION_SECRET: "session-secret",
  AUTH_INTERNAL_SECRET: "internal-secret",
};

/**
 * Another web page on the operator's machine or network, on the same host as the service but
 * another port: the same *site* (ports do not count), so the console's `SameSite=Strict` session
 * cookie goes with every request it makes to the service (as for a sibling subdomain of the
 * service's domain). It serves one page, whatever the path.
 */
async function startAttacker(html: () => string): Promise<{ url: string; close(): Promise<void> }> {
  const srv = http.createServer((_req, res) => {
    res.writeHead(200, { "content-type": "text/html; charset=utf-8" }).end(html());
  });
  await new Promise<void>((resolve) => srv.listen(0, "127.0.0.1", resolve));
  const { port } = srv.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    close: () => new Promise<void>((resolve) => srv.close(() => resolve())),
  };
}

describe("console: another site's page cannot act with the operator's session (headless Chromium)", () => {
  let server: TestServer;
  let browser: Browser;
  let context: BrowserContext;
  let page: Page;
  let attackerHtml = "";
  let attacker: Awaited<ReturnType<typeof startAttacker>>;
  let runId = "";
  const cookie = makeSessionCookie(
    SECRETS.AUTH_SESSION_SECRET,
    SCOPE,
    Math.floor(Date.now() / 1000) + 3600,
  );
  const h = { cookie: `session=${cookie}` };
  const runCount = async () => {
    const r = await server.call("POST", `${DF}/monitor/runs`, {
      headers: h,
      body: { elementName: "victim", elementType: "DPL", pageNo: 0, pageSize: 50 },
    });
    assert.equal(r.body.status, true, r.text);
    return r.body.data.totalCount as number;
  };
  const webhookSecret = async () =>
    (await server.call("GET", `${DF}/webhook/secret`, { headers: h })).body.data.secret as string;

  before(async () => {
    assertConsoleReady();
    server = await startServer(SECRETS);
    await deployAndActivate(server, "victim", NO_SCRIPT_FLOW, {}, h);
    const r = await server.call("POST", `${DF}/run-sync`, {
      headers: h,
      body: { elementName: "victim", parameter: { orders: [] } },
    });
    runId = r.headers.get("x-run-id") ?? "";
    assert.ok(runId, r.text);
    attacker = await startAttacker(() => attackerHtml);
    browser = await chromium.launch({
      executablePath: "/usr/bin/chromium",
      args: FLAGS,
      headless: true,
    });
    context = await browser.newContext();
    // The cookie exactly as the console's scope form sets it (console/src/api.ts).
    await context.addCookies([
      { name: "session", value: cookie, url: server.url, sameSite: "Strict" },
    ]);
    page = await context.newPage();
  });
  after(async () => {
    await browser?.close();
    await attacker?.close();
    await server?.close();
  });

  it("a body-less POST from another page (re-run, webhook secret rotation) is refused", async () => {
    const before = { runs: await runCount(), secret: await webhookSecret() };
    assert.equal(before.runs, 1);
    // Simple requests: no preflight, the cookie goes along, the answer is opaque but the deed done.
    attackerHtml = `<script>
      const base = ${JSON.stringify(server.url + DF)};
      const post = (p) => fetch(base + p, { method: "POST", mode: "no-cors", credentials: "include" });
      Promise.all([post("/run/${runId}/rerun"), post("/webhook/secret/rotate")])
        .then(() => { document.title = "sent"; }, (e) => { document.title = "error " + e; });
    </script>`;
    await page.goto(`${attacker.url}/`);
    await page.waitForFunction(() => document.title !== "", undefined, { timeout: 30_000 });
    assert.equal(await page.title(), "sent");
    assert.equal(await runCount(), before.runs, "no run was started by the other page");
    assert.equal(await webhookSecret(), before.secret, "the webhook secret was not rotated");
  });

  it("the console is not shown in another page's frame (clickjacking)", async () => {
    attackerHtml = `<iframe id="f" width="1000" height="800"
      src="${server.url}/console/#/run/${runId}" onload="document.title = 'loaded'"></iframe>`;
    await page.goto(`${attacker.url}/framer`);
    await page.waitForFunction(() => document.title === "loaded", undefined, { timeout: 30_000 });
    const shown = await Promise.all(
      page
        .frames()
        .filter((f) => f !== page.mainFrame())
        .map((f) => f.evaluate(() => document.querySelector("#view") !== null).catch(() => false)),
    );
    assert.deepEqual(shown, [false], "the framed console did not render");
  });

  it("the console's own page and the API answer with headers that keep browsers safe", async () => {
    const c = await server.call("GET", "/console/", {});
    assert.equal(c.headers.get("x-frame-options"), "DENY");
    assert.equal(c.headers.get("x-content-type-options"), "nosniff");
    const csp = c.headers.get("content-security-policy") ?? "";
    for (const d of [
      "frame-ancestors 'none'",
      "script-src 'self'",
      "object-src 'none'",
      "base-uri 'none'",
    ])
      assert.ok(csp.includes(d), `${d} in ${csp}`);
    const j = await server.call("GET", `${DF}/run/${runId}/result`, { headers: h });
    assert.equal(j.headers.get("x-content-type-options"), "nosniff");
    assert.equal(j.headers.get("x-frame-options"), "DENY");
  });

  it("the console itself still re-runs from its own page (same origin)", async () => {
    const before = await runCount();
    await page.goto(`${server.url}/console/#/run/${runId}`);
    await page.locator("#rerun").click();
    await page.waitForURL((u) => /#\/run\/[^?]+$/.test(u.hash) && !u.hash.includes(runId), {
      timeout: 30_000,
    });
    assert.equal(await runCount(), before + 1);
  });
});
