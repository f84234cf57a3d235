import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import type { Browser, Page } from "playwright-core";
import { assertConsoleReady, consolePage, SESSION_SECRET } from "../helpers/console-page.ts";
import { DF, deployAndActivate, NO_SCRIPT_FLOW } from "../helpers/flows.ts";
import { scopeHeaders, startServer, type TestServer } from "../helpers/server.ts";

/** A run whose kept directory was given back says so on its page (docs/security.md, "Disk"). */
describe("console: a run whose kept files were removed (headless Chromium)", () => {
  let server: TestServer;
  let browser: Browser;
  let page: Page;

  before(async () => {
    assertConsoleReady();
    server = await startServer({ AUTH_SESSION_SECRET: SESSION_SECRET });
    await deployAndActivate(server, "kept", NO_SCRIPT_FLOW);
    ({ browser, page } = await consolePage(server));
  });
  after(async () => {
    await browser?.close();
    await server?.close();
  });

  it("shows when and why, as GET /monitor/run does", async () => {
    const r = await server.call("POST", `${DF}/run-sync`, {
      headers: scopeHeaders(),
      body: { elementName: "kept", parameter: { orders: [] } },
    });
    assert.equal(r.body.code, 0, r.text);
    const id = r.headers.get("x-run-id") ?? "";
    const reason =
      "past SCRIPT_KEPT_BYTES_PER_APP (test): this run's directory, its oldest, was removed";
    // As the disk watch records it when it gives a kept directory back (src/runs/kept-dirs.ts).
    await server.services.store.markFilesRemoved(id, { time: Date.now(), reason });
    await page.goto(`${server.url}/console/#/run/${id}`);
    const notice = page.locator("#files-removed");
    await notice.waitFor();
    assert.match(
      (await notice.textContent()) ?? "",
      /Working directory removed .*past SCRIPT_KEPT_BYTES_PER_APP/,
    );
  });

  it("a run whose files are all there shows no such notice", async () => {
    const r = await server.call("POST", `${DF}/run-sync`, {
      headers: scopeHeaders(),
      body: { elementName: "kept", parameter: { orders: [] } },
    });
    const id = r.headers.get("x-run-id") ?? "";
    await page.goto(`${server.url}/console/#/run/${id}`);
    // Only the hash changes: until this run's page is drawn, the previous run's page (and its
    // notice) is still there, with the same status.
    await page.locator("#run-facts dd", { hasText: id }).waitFor();
    assert.equal(await page.locator("#files-removed").count(), 0);
  });
});
