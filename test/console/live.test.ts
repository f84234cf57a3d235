import assert from "node:assert/strict";
import fs from "node:fs";
import path from "node:path";
import { after, before, describe, it } from "node:test";
import { type Browser, chromium, type Page } from "playwright-core";
import { makeSessionCookie } from "../../src/auth/tokens.ts";
import { CONSOLE_DIST } from "../../src/http/console-routes.ts";
import { DF, deployAndActivate } from "../helpers/flows.ts";
import { gatedScript, release } from "../helpers/gate-file.ts";
import { SCOPE, scopeHeaders, startServer, type TestServer } from "../helpers/server.ts";

const CHROMIUM = "/usr/bin/chromium";
const FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--no-first-run"];

/**
 * in → work → out, where `work` prints, then waits for a file named `go` in the run's working
 * directory (the test creates it once the page showed the output): the run is watched while it
 * runs, at a moment the test chooses, with no sleep on either side.
 */
const FLOW = {
  vertexes: [
    { id: "in", type: "input" },
    {
      id: "work",
      type: "script",
      config: {
        code: gatedScript(
          ["print('tick 1', flush=True)", "print('warming up', file=sys.stderr, flush=True)"],
          ["print('tick 2', flush=True)"],
        ),
      },
    },
    { id: "out", type: "output" },
  ],
  edges: [
    { source: "in", target: "work" },
    { source: "work", target: "out" },
  ],
};

describe("console: a run page follows a 3-node run live (headless Chromium)", () => {
  let server: TestServer;
  let browser: Browser;
  let page: Page;

  before(async () => {
    assert.ok(fs.existsSync(CHROMIUM), `${CHROMIUM} is missing (bash bin/system-deps.sh)`);
    assert.ok(
      fs.existsSync(path.join(CONSOLE_DIST, "index.html")),
      "build the console first: npm run build:console",
    );
    server = await startServer({ AUTH_SESSION_SECRET: "session-secret" });
    await deployAndActivate(server, "live3", FLOW);
    browser = await chromium.launch({ executablePath: CHROMIUM, args: FLAGS, headless: true });
    const context = await browser.newContext({ viewport: { width: 1280, height: 900 } });
    const cookie = makeSessionCookie("session-secret", SCOPE, Math.floor(Date.now() / 1000) + 3600);
    await context.addCookies([{ name: "session", value: cookie, url: server.url }]);
    page = await context.newPage();
  });
  after(async () => {
    await browser?.close();
    await server?.close();
  });

  it("nodes change state and the script's output appears as printed, then the run's end", async () => {
    const r = await server.call("POST", `${DF}/run`, {
      headers: scopeHeaders(),
      body: { elementName: "live3", parameter: { n: 3 } },
    });
    assert.equal(r.body.status, true, r.text);
    const runId = r.body.data as string;
    await page.goto(`${server.url}/console/#/run/${runId}`);
    // While the script waits: it is RUNNING, its upstream SUCCESS, its downstream not started.
    await page.locator('[data-node="work"].s-running').waitFor({ timeout: 60_000 });
    await page.locator('[data-node="in"].s-success').waitFor({ timeout: 60_000 });
    assert.match(
      (await page.locator('[data-node="out"]').getAttribute("class")) ?? "",
      /s-pending/,
    );
    await page.locator("#live-stdout", { hasText: "tick 1" }).waitFor({ timeout: 60_000 });
    await page.locator("#live-stderr", { hasText: "warming up" }).waitFor({ timeout: 60_000 });
    assert.equal(await page.locator("h1 [data-status='STARTED']").count(), 1, "the run still runs");
    assert.equal((await server.services.store.getRun(null, runId))?.status, "STARTED");
    assert.doesNotMatch((await page.locator("#live-stdout").textContent()) ?? "", /tick 2/);
    // Let the script finish: the page shows the end without a reload.
    await release(server.dataDir, runId);
    await page.locator("h1 [data-status='SUCCESS']").waitFor({ timeout: 60_000 });
    for (const id of ["in", "work", "out"])
      assert.match(
        (await page.locator(`[data-node="${id}"]`).getAttribute("class")) ?? "",
        /s-success/,
      );
    assert.equal(await page.locator("#live-output").count(), 0, "an ended run shows its record");
  });
});
