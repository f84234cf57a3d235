import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import type { Browser, Page } from "playwright-core";
import { assertConsoleReady, consolePage, SESSION_SECRET } from "../helpers/console-page.ts";
import { DF } from "../helpers/flows.ts";
import { scopeHeaders, startServer, type TestServer } from "../helpers/server.ts";

/** Markup a tenant puts in every string it controls: shown, it must stay text. */
const P = `<b class=pwn>x<img class=pwn src=x:>`;

/** A flow whose revision name and description hold markup, whose script prints it, echoes the parameter and fails with it. */
const FLOW = {
  vertexes: [
    { id: "in", type: "input" },
    {
      id: "s",
      type: "script",
      config: {
        code: `def main(p):\n    print(${JSON.stringify(P)})\n    import sys\n    sys.stderr.write(p["x"])\n    raise ValueError(p["x"])\n`,
      },
    },
    { id: "out", type: "output" },
  ],
  edges: [
    { source: "in", target: "s" },
    { source: "s", target: "out" },
  ],
};

/**
 * Stored XSS: every string a tenant controls that the console shows (revision name,
 * description, parameter, node input, stdout, stderr, error, traceback) is rendered as
 * text, never parsed as markup (docs/security.md, "The console and browsers").
 */
describe("console: a tenant's markup is shown as text (headless Chromium)", () => {
  let server: TestServer;
  let browser: Browser;
  let page: Page;
  let runId = "";
  const noMarkup = async (where: string) => {
    await page.locator("body[data-ready]").waitFor({ timeout: 30_000 });
    assert.equal(await page.locator(".pwn").count(), 0, `markup parsed on ${where}`);
    assert.ok(
      (await page.locator("#view").innerText()).includes(P),
      `the text is shown on ${where}`,
    );
  };

  before(async () => {
    assertConsoleReady();
    server = await startServer({ AUTH_SESSION_SECRET: SESSION_SECRET });
    const h = scopeHeaders();
    const d = await server.call("POST", `${DF}/flow/deploy`, {
      headers: h,
      body: {
        elementName: "hostile",
        revisionName: P,
        path: "/flows",
        flow: FLOW,
        configure: { logContent: "DETAILED" },
        description: { en: P },
      },
    });
    assert.equal(d.body.status, true, d.text);
    const a = await server.call("POST", `${DF}/flow/activate`, {
      headers: h,
      body: { elementName: "hostile", path: "/flows" },
    });
    assert.equal(a.body.data, "APPROVED", a.text);
    const r = await server.call("POST", `${DF}/run-sync`, {
      headers: h,
      body: { elementName: "hostile", path: "/flows", parameter: { x: P } },
    });
    runId = r.headers.get("x-run-id") ?? "";
    assert.ok(runId, r.text);
    ({ browser, page } = await consolePage(server));
  });
  after(async () => {
    await browser?.close();
    await server?.close();
  });

  it("on the flows, runs, revisions and run pages", async () => {
    const name = "hostile";
    for (const hash of [
      "#/flows",
      `#/runs/DPL/${name}?path=%2Fflows`,
      `#/revisions/${name}?path=%2Fflows`,
      `#/run/${runId}?node=s`,
    ]) {
      await page.goto(`${server.url}/console/${hash}`);
      await page.evaluate(() => {
        delete document.body.dataset.ready;
      });
      await page.reload();
      await noMarkup(hash);
    }
    const node = await page.locator("#node-detail").innerText();
    for (const part of ["stdout", "stderr", "Input"]) assert.ok(node.includes(part), node);
    assert.ok((node.match(/<b class=pwn>/g) ?? []).length >= 3, node);
  });
});
