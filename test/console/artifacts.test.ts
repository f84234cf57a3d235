import assert from "node:assert/strict";
import fs from "node:fs";
import path from "node:path";
import { after, before, describe, it } from "node:test";
import { type Browser, chromium, type Page } from "playwright-core";
import { makeSessionCookie } from "../../src/auth/tokens.ts";
import { CONSOLE_DIST } from "../../src/http/console-routes.ts";
import { artifactsSaved, WRITERS } from "../helpers/artifacts.ts";
import { DF, deployAndActivate } from "../helpers/flows.ts";
import { SCOPE, scopeHeaders, startServer, type TestServer } from "../helpers/server.ts";
import { within } from "../helpers/wait.ts";

const CHROMIUM = "/usr/bin/chromium";
const FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--no-first-run"];

describe("console: a run page lists its artifacts with download links (headless Chromium)", () => {
  let server: TestServer;
  let browser: Browser;
  let page: Page;

  before(async () => {
    assert.ok(fs.existsSync(CHROMIUM), `${CHROMIUM} is missing (bash bin/system-deps.sh)`);
    assert.ok(
      fs.existsSync(path.join(CONSOLE_DIST, "index.html")),
      "build the console first: npm run build:console",
    );
    server = await startServer({ AUTH_SESSION_SECRET: "session-secret", FILE_SWEEP_MS: "0" });
    await deployAndActivate(server, "keeper", WRITERS, { fileCleanup: { type: "keep" } });
    browser = await chromium.launch({ executablePath: CHROMIUM, args: FLAGS, headless: true });
    const context = await browser.newContext({ acceptDownloads: true });
    const cookie = makeSessionCookie("session-secret", SCOPE, Math.floor(Date.now() / 1000) + 3600);
    await context.addCookies([{ name: "session", value: cookie, url: server.url }]);
    page = await context.newPage();
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
