import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import type { Browser, Page } from "playwright-core";
import { assertConsoleReady, consolePage, SESSION_SECRET } from "../helpers/console-page.ts";
import { DF, deployAndActivate } from "../helpers/flows.ts";
import { scopeHeaders, startServer, type TestServer } from "../helpers/server.ts";

/** A node value the run did not keep (docs/flow-graph.md, node logs) is said so, not shown as nothing. */
describe("console: a node's values too large to keep (headless Chromium)", () => {
  let server: TestServer;
  let browser: Browser;
  let page: Page;
  let runId = "";
  before(async () => {
    assertConsoleReady();
    // Tiny, so that this parameter is too large to keep.
    server = await startServer({
      AUTH_SESSION_SECRET: SESSION_SECRET,
      LIMIT_NODE_LOG_BYTES: "100",
    });
    await deployAndActivate(server, "echo", {
      vertexes: [
        { id: "in", type: "input" },
        { id: "t", type: "transform", config: { operators: [{ type: "expr", expr: "$" }] } },
      ],
      edges: [{ source: "in", target: "t" }],
    });
    const r = await server.call("POST", `${DF}/run-sync`, {
      headers: scopeHeaders(),
      body: { elementName: "echo", parameter: { x: "a".repeat(500) } },
    });
    runId = r.headers.get("x-run-id") ?? "";
    assert.ok(runId, r.text);
    ({ browser, page } = await consolePage(server));
  });
  after(async () => {
    await browser?.close();
    await server?.close();
  });

  it("says the node's input and output were too large to keep", async () => {
    await page.goto(`${server.url}/console/#/run/${runId}?node=t`);
    await page.locator("#node-detail").waitFor({ timeout: 30_000 });
    const text = await page.locator("#node-detail").innerText();
    assert.equal((text.match(/Too large to keep/g) ?? []).length, 2, text);
    assert.match(text, /LIMIT_NODE_LOG_BYTES/);
  });
});
