import assert from "node:assert/strict";
import fs from "node:fs";
import path from "node:path";
import { after, before, describe, it } from "node:test";
import { type Browser, chromium, type Page } from "playwright-core";
import { makeSessionCookie } from "../../src/auth/tokens.ts";
import { CONSOLE_DIST } from "../../src/http/console-routes.ts";
import { DF } from "../helpers/flows.ts";
import {
  OTHER_SCOPE,
  SCOPE,
  scopeHeaders,
  startServer,
  type TestServer,
} from "../helpers/server.ts";

const CHROMIUM = "/usr/bin/chromium";
const FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--no-first-run"];

/** The console's audit page lists the scope's entries and filters them (docs/audit.md). */
describe("console: audit page (headless Chromium)", () => {
  let server: TestServer;
  let browser: Browser;
  let page: Page;
  const h = scopeHeaders();

  before(async () => {
    assert.ok(fs.existsSync(CHROMIUM), `${CHROMIUM} is missing (bash bin/system-deps.sh)`);
    assert.ok(
      fs.existsSync(path.join(CONSOLE_DIST, "index.html")),
      "build the console first: npm run build:console",
    );
    server = await startServer({ AUTH_SESSION_SECRET: "session-secret" });
    await server.call("POST", `${DF}/flow/activate`, { headers: h, body: { elementName: "nope" } });
    await server.call("POST", `${DF}/run/delete`, { headers: h, body: { runIds: ["r-1"] } });
    const other = scopeHeaders(OTHER_SCOPE);
    await server.call("POST", `${DF}/run/terminate`, { headers: other, body: { runIds: ["x"] } });
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

  it("lists the scope's changes, newest first, and filters by outcome", async () => {
    await page.goto(`${server.url}/console/#/audit`);
    await page.locator("tr[data-audit]").first().waitFor();
    const actions = await page.locator("tr[data-audit] td:nth-child(4)").allTextContents();
    assert.deepEqual(actions, ["delete", "activate"], "another scope's terminate is not shown");
    await page.locator("[data-audit-filters] select[name=outcome]").selectOption("failure");
    await page.locator("[data-audit-filters] button[type=submit]").click();
    await page.waitForURL((u) => u.hash.includes("outcome=failure"));
    await page.locator("tr[data-audit]").first().waitFor();
    await page.waitForFunction(() => document.querySelectorAll("tr[data-audit]").length === 1);
    const row = page.locator("tr[data-audit]");
    assert.equal(await row.locator("td:nth-child(4)").textContent(), "activate");
    assert.equal(await row.locator("[data-outcome]").textContent(), "failure");
    assert.match(
      (await row.locator("td:nth-child(5)").textContent()) ?? "",
      /"elementName":"nope"/,
    );
  });
});
