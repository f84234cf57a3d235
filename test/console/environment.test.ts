import assert from "node:assert/strict";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { after, before, describe, it } from "node:test";
import type { Browser, Page } from "playwright-core";
import { assertConsoleReady, consolePage, SESSION_SECRET } from "../helpers/console-page.ts";
import { scopeHeaders, startServer, type TestServer, upload } from "../helpers/server.ts";
import { writeWheel } from "../helpers/wheels.ts";

const WITH_DEPS = `# /// script
# dependencies = ["sluice-helper"]
# ///
import sluice_helper

def main(p=None):
    return sluice_helper.help()
`;

describe("console: a script's environment (headless Chromium)", () => {
  let server: TestServer;
  let browser: Browser;
  let page: Page;
  const wheels = fs.mkdtempSync(path.join(os.tmpdir(), "sluice-wheels-"));
  let taskId = "";

  before(async () => {
    assertConsoleReady();
    writeWheel(wheels, {
      name: "sluice-helper",
      version: "2.1",
      files: { "sluice_helper.py": "def help():\n    return 'helped'\n" },
    });
    server = await startServer({
      AUTH_SESSION_SECRET: SESSION_SECRET,
      PIP_NO_INDEX: "1",
      PIP_FIND_LINKS: wheels,
    });
    const v1 = await upload(server, [{ name: "envd.py", content: WITH_DEPS }], { path: "/c" });
    assert.equal(v1.body.data[0].status, 0, v1.text);
    const r = await server.call("POST", "/script/external/envd/run-sync", {
      headers: scopeHeaders(),
      body: {},
    });
    assert.equal(r.headers.get("x-task-status"), "SUCCESS", r.text);
    taskId = r.headers.get("x-task-id") ?? "";
    const plain = "def main(p=None):\n    return 1\n";
    const v2 = await upload(server, [{ name: "envd.py", content: plain }], {
      path: "/c",
      overwrite: "true",
    });
    assert.equal(v2.body.data[0].status, 0, v2.text);

    ({ browser, page } = await consolePage(server));
  });
  after(async () => {
    await browser?.close();
    await server?.close();
    fs.rmSync(wheels, { recursive: true, force: true });
  });

  it("lists each version with the packages of its environment", async () => {
    await page.goto(`${server.url}/console/#/versions/envd?path=/c`);
    const v1 = page.locator("#versions tr[data-version='1']");
    await v1.locator("[data-package='sluice-helper==2.1']").waitFor();
    assert.match((await v1.locator(".env").textContent()) ?? "", /declared: sluice-helper/);
    const v2 = page.locator("#versions tr[data-version='2']");
    assert.equal(await v2.locator("[data-package]").count(), 0);
    assert.match((await v2.locator(".env").textContent()) ?? "", /no dependencies/);
  });

  it("a task's run page shows the environment of the version it ran", async () => {
    await page.goto(`${server.url}/console/#/run/${taskId}`);
    const env = page.locator("#run-environment");
    await env.locator("[data-package='sluice-helper==2.1']").waitFor();
    const hash = await env.locator("code").first().textContent();
    assert.match(hash ?? "", /^[0-9a-f]{32}$/);
  });
});
