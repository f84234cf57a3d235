import assert from "node:assert/strict";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { after, before, describe, it } from "node:test";
import type { Browser, Page } from "playwright-core";
import { assertConsoleReady, consolePage, SESSION_SECRET } from "../helpers/console-page.ts";
import { DF, deployAndActivate } from "../helpers/flows.ts";
import { type Hook, startHook } from "../helpers/hook.ts";
import { scopeHeaders, startServer, type TestServer } from "../helpers/server.ts";

// As test/console/console.test.ts: `SLUICE_SCREENSHOTS=docs/console` refreshes the committed shot.
const SHOTS =
  process.env.SLUICE_SCREENSHOTS ?? fs.mkdtempSync(path.join(os.tmpdir(), "sluice-shots-"));

/** in → count (the side effect) → flaky (fails until healed) → out. */
const chain = (hookUrl: string) => ({
  vertexes: [
    { id: "in", type: "input" },
    { id: "count", type: "http", config: { method: "POST", url: `${hookUrl}/count`, body: {} } },
    { id: "flaky", type: "http", config: { url: `${hookUrl}/flaky` } },
    { id: "out", type: "output" },
  ],
  edges: [
    { source: "in", target: "count" },
    { source: "count", target: "flaky" },
    { source: "flaky", target: "out" },
  ],
});

describe("console: re-run and resume buttons on a run page (headless Chromium)", () => {
  let server: TestServer;
  let hook: Hook;
  let browser: Browser;
  let page: Page;
  const h = scopeHeaders();
  const failedRun = async (elementName: string) => {
    const r = await server.call("POST", `${DF}/run-sync`, {
      headers: h,
      body: { elementName, parameter: {} },
    });
    assert.equal(r.body.code, 28020004, r.text);
    return r.headers.get("x-run-id") ?? "";
  };

  before(async () => {
    assertConsoleReady();
    server = await startServer({ AUTH_SESSION_SECRET: SESSION_SECRET });
    hook = await startHook();
    await deployAndActivate(server, "chain", chain(hook.url));
    await deployAndActivate(server, "concise", chain(hook.url), { logContent: "CONCISE" });
    ({ browser, page } = await consolePage(server));
  });
  after(async () => {
    await browser?.close();
    await server?.close();
    await hook?.close();
  });

  it("a run whose outputs were not kept offers Re-run only", async () => {
    const id = await failedRun("concise");
    await page.goto(`${server.url}/console/#/run/${id}`);
    await page.locator("h1 [data-status='FAILURE']").waitFor();
    await page.locator("#rerun").waitFor();
    assert.equal(await page.locator("#resume").count(), 0);
  });

  it("resumes a failed run from its failed node, then re-runs the resumed run", async () => {
    const failedId = await failedRun("chain");
    assert.equal(hook.calls("/count"), 2, "concise ran count once, chain once");
    await page.goto(`${server.url}/console/#/run/${failedId}`);
    await page.locator("h1 [data-status='FAILURE']").waitFor();
    await page.locator("#resume").waitFor();
    await page.screenshot({ path: path.join(SHOTS, "failed-run.png"), fullPage: true });
    hook.healFlaky();
    await page.locator("#resume").click();
    await page.waitForURL((u) => u.hash.startsWith("#/run/") && !u.hash.includes(failedId));
    await page.locator("h1 [data-status='SUCCESS']").waitFor({ timeout: 20_000 });
    assert.equal(await page.locator("#rerun-of a").textContent(), failedId);
    assert.match((await page.locator('[data-node="count"]').getAttribute("class")) ?? "", /reused/);
    assert.doesNotMatch(
      (await page.locator('[data-node="flaky"]').getAttribute("class")) ?? "",
      /reused/,
    );
    assert.equal(hook.calls("/count"), 2, "the resume did not call count again");
    await page.locator('[data-node="count"]').click();
    await page.locator("#node-detail .reused").waitFor();
    await page.screenshot({ path: path.join(SHOTS, "resume.png"), fullPage: true });
    // A SUCCESS run is not resumable; a re-run repeats every node.
    assert.equal(await page.locator("#resume").count(), 0);
    const resumedUrl = page.url();
    await page.locator("#rerun").click();
    await page.waitForURL((u) => u.toString() !== resumedUrl && u.hash.startsWith("#/run/"));
    // The new run's page, not the one still shown until it is drawn.
    await page.locator("#run-facts", { hasText: "Re-runs" }).waitFor({ timeout: 20_000 });
    await page.locator("h1 [data-status='SUCCESS']").waitFor({ timeout: 20_000 });
    assert.equal(hook.calls("/count"), 3);
    assert.match((await page.locator("#run-facts").textContent()) ?? "", /Re-runs/);
  });
});
