import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import type { Browser, Page } from "playwright-core";
import { assertConsoleReady, consolePage, SESSION_SECRET } from "../helpers/console-page.ts";
import { DF, deployAndActivate } from "../helpers/flows.ts";
import { gatedScript, release } from "../helpers/gate-file.ts";
import { scopeHeaders, startServer, type TestServer } from "../helpers/server.ts";

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
    assertConsoleReady();
    server = await startServer({ AUTH_SESSION_SECRET: SESSION_SECRET });
    await deployAndActivate(server, "live3", FLOW);
    ({ browser, page } = await consolePage(server));
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
