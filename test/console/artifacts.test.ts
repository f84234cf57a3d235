import assert from "node:assert/strict";
import fs from "node:fs";
import { after, before, describe, it } from "node:test";
import type { Browser, Page } from "playwright-core";
import { artifactsSaved, WRITERS } from "../helpers/artifacts.ts";
import { assertConsoleReady, consolePage, SESSION_SECRET } from "../helpers/console-page.ts";
import { DF, deployAndActivate } from "../helpers/flows.ts";
import { scopeHeaders, startServer, type TestServer } from "../helpers/server.ts";
import { within } from "../helpers/wait.ts";

describe("console: a run page lists its artifacts with download links (headless Chromium)", () => {
  let server: TestServer;
  let browser: Browser;
  let page: Page;

  before(async () => {
    assertConsoleReady();
    server = await startServer({ AUTH_SESSION_SECRET: SESSION_SECRET, FILE_SWEEP_MS: "0" });
    await deployAndActivate(server, "keeper", WRITERS, { fileCleanup: { type: "keep" } });
    ({ browser, page } = await consolePage(server, { acceptDownloads: true }));
  });
  after(async () => {
    await browser?.close();
    await server?.close();
  });

  it("shows each kept file with its node and size, what was skipped, and downloads one", async () => {
    const saved = artifactsSaved(server.services);
    const r = await server.call("POST", `${DF}/run-sync`, {
      headers: scopeHeaders(),
      body: { elementName: "keeper" },
    });
    const runId = r.headers.get("x-run-id") ?? "";
    await within(saved(runId), 30_000, "the run's files are kept");
    await page.goto(`${server.url}/console/#/run/${runId}`);
    const rows = page.locator("#run-artifacts tbody tr");
    await rows.first().waitFor();
    assert.deepEqual(
      await rows.evaluateAll((trs) => trs.map((t) => t.getAttribute("data-artifact"))),
      ["b.txt", "big.bin", "page.html", "report.csv", "sub/data.json"],
    );
    assert.match(
      (await page.locator('#run-artifacts tr[data-artifact="report.csv"]').textContent()) ?? "",
      /report\.csv\s*a\s*14 B/,
    );
    assert.ok(await page.locator('#run-artifacts [data-skipped="shadow"]').isVisible());
    const [download] = await Promise.all([
      page.waitForEvent("download"),
      page.locator('#run-artifacts a:text("sub/data.json")').click(),
    ]);
    assert.equal(download.suggestedFilename(), "data.json");
    const file = await download.path();
    assert.equal(fs.readFileSync(file, "utf8"), '{"ok": true}');
  });
});
