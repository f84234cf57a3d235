import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import type { Browser, Page } from "playwright-core";
import { assertConsoleReady, consolePage, SESSION_SECRET } from "../helpers/console-page.ts";
import { DF } from "../helpers/flows.ts";
import { OTHER_SCOPE, scopeHeaders, startServer, type TestServer } from "../helpers/server.ts";

/** The console's audit page lists the scope's entries and filters them (docs/audit.md). */
describe("console: audit page (headless Chromium)", () => {
  let server: TestServer;
  let browser: Browser;
  let page: Page;
  const h = scopeHeaders();

  before(async () => {
    assertConsoleReady();
    server = await startServer({ AUTH_SESSION_SECRET: SESSION_SECRET });
    await server.call("POST", `${DF}/flow/activate`, { headers: h, body: { elementName: "nope" } });
    await server.call("POST", `${DF}/run/delete`, { headers: h, body: { runIds: ["r-1"] } });
    const other = scopeHeaders(OTHER_SCOPE);
    await server.call("POST", `${DF}/run/terminate`, { headers: other, body: { runIds: ["x"] } });
    ({ browser, page } = await consolePage(server));
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
