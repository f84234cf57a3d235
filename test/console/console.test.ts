import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { after, before, describe, it } from "node:test";
import { type Browser, chromium, type Page } from "playwright-core";
import { makeSessionCookie, signToken } from "../../src/auth/tokens.ts";
import { CONSOLE_DIST } from "../../src/http/console-routes.ts";
import { DF } from "../helpers/flows.ts";
import { startServer, type TestServer, upload } from "../helpers/server.ts";

const CHROMIUM = "/usr/bin/chromium";
const FLAGS = [
  "--headless",
  "--no-sandbox",
  "--disable-gpu",
  "--disable-background-networking",
  "--disable-component-update",
  "--disable-sync",
  "--no-first-run",
];
// Screenshots go to a temp dir; `SLUICE_SCREENSHOTS=docs/console` refreshes the committed ones.
const SHOTS =
  process.env.SLUICE_SCREENSHOTS ?? fs.mkdtempSync(path.join(os.tmpdir(), "sluice-shots-"));
const ID = { app: "app1", space: "space1", user: "alice" };
const SECRETS = {
  AUTH_MODE: "signature",
  AUTH_APP_SECRETS: "app1=app-secret",
  AUTH_SESSION_SECRET: "session-secret",
  AUTH_INTERNAL_SECRET: "internal-secret",
};

const FLOW = {
  vertexes: [
    { id: "in", type: "input", config: { schema: { type: "object", required: ["orders"] } } },
    {
      id: "clean",
      type: "transform",
      config: {
        operators: [
          { id: "e", type: "expr", expr: "orders" },
          { id: "f", type: "filter", expr: "amount > 0" },
        ],
      },
    },
    {
      id: "score",
      type: "script",
      config: {
        code: "def main(rows):\n    print('scoring', len(rows), 'rows')\n    return [dict(r, score=r['amount'] * 2) for r in rows]\n",
      },
    },
    {
      id: "count",
      type: "transform",
      config: { operators: [{ id: "c", type: "expr", expr: "{'n': $count($)}" }] },
    },
    { id: "out", type: "output" },
  ],
  edges: [
    { source: "in", target: "clean" },
    { source: "clean", target: "score" },
    { source: "clean", target: "count" },
    { source: "score", target: "out" },
  ],
};
const SLOW = {
  vertexes: [
    { id: "in", type: "input" },
    {
      id: "nap",
      type: "script",
      config: { code: "import time\ndef main(p):\n    time.sleep(60)\n" },
    },
  ],
  edges: [{ source: "in", target: "nap" }],
};

describe("web console in headless Chromium (signature mode, session cookie)", () => {
  let server: TestServer;
  let browser: Browser;
  let page: Page;
  const headers = () => ({
    ...ID,
    token: signToken("app-secret", ID, Math.floor(Date.now() / 1000)),
  });
  const call = (p: string, body: unknown) =>
    server.call("POST", DF + p, { headers: headers(), body });
  const revisionsOf = (elementName: string) => ({
    elementName,
    path: "/demo",
    pageNo: 0,
    pageSize: 20,
  });

  before(async () => {
    // Never skipped: `npm test` installs Chromium first or says how (docs/operations.md).
    assert.ok(
      fs.existsSync(CHROMIUM),
      `${CHROMIUM} is missing: as root, \`apt-get install chromium\` (or \`bash bin/system-deps.sh\`)`,
    );
    if (!fs.existsSync(path.join(CONSOLE_DIST, "index.html"))) {
      const vite = path.resolve(import.meta.dirname, "../../node_modules/vite/bin/vite.js");
      const built = spawnSync(process.execPath, [vite, "build", "console"], {
        cwd: path.resolve(import.meta.dirname, "../.."),
        encoding: "utf8",
      });
      assert.equal(built.status, 0, built.stderr);
    }
    server = await startServer(SECRETS);
    for (const [name, flow] of [
      ["orders", FLOW],
      ["slow", SLOW],
    ] as const) {
      const configure =
        name === "orders"
          ? {
              triggers: [
                { type: "manual" },
                { type: "cron", name: "nightly", crontab: "0 2 * * *", parameter: { orders: [] } },
              ],
            }
          : {};
      const d = await call("/flow/deploy", {
        elementName: name,
        revisionName: "first",
        path: "/demo",
        flow,
        configure,
        description: { en: `${name} demo` },
      });
      assert.equal(d.body.status, true, d.text);
    }
    assert.equal(
      (await call("/flow/activate", { elementName: "orders", path: "/demo" })).body.data,
      "APPROVED",
    );
    assert.equal(
      (await call("/flow/activate", { elementName: "slow", path: "/demo" })).body.data,
      "APPROVED",
    );
    browser = await chromium.launch({ executablePath: CHROMIUM, args: FLAGS, headless: true });
    const context = await browser.newContext({ viewport: { width: 1280, height: 800 } });
    const cookie = makeSessionCookie("session-secret", ID, Math.floor(Date.now() / 1000) + 3600);
    await context.addCookies([{ name: "session", value: cookie, url: server.url }]);
    page = await context.newPage();
    page.on(
      "dialog",
      (d) =>
        void d.accept(JSON.stringify({ orders: [{ amount: 3 }, { amount: -1 }, { amount: 5 }] })),
    );
  });
  after(async () => {
    await browser?.close();
    await server?.close();
  });

  it("lists flows with status and last run", async () => {
    await page.goto(`${server.url}/console/`);
    const row = page.locator('tr[data-flow="orders"]');
    await row.waitFor();
    assert.equal(await row.locator("[data-status]").first().textContent(), "APPROVED");
    await page.screenshot({ path: path.join(SHOTS, "flows.png") });
  });

  it("runs a flow from its button and watches it finish on the run page", async () => {
    await page.locator('tr[data-flow="orders"] button', { hasText: "Run" }).click();
    await page.waitForURL(/#\/run\//);
    await page.locator("h1 [data-status='SUCCESS']").waitFor({ timeout: 20_000 });
    assert.equal(await page.locator("[data-node]").count(), 5);
    assert.match(
      (await page.locator('[data-node="score"]').getAttribute("class")) ?? "",
      /s-success/,
    );
    await page.locator('[data-node="score"]').click();
    await page.locator("#node-detail").getByText("scoring 2 rows").waitFor();
    assert.match((await page.locator("#node-detail").textContent()) ?? "", /"score": 10/);
    await page.screenshot({ path: path.join(SHOTS, "run.png"), fullPage: true });
  });

  it("lists runs with filters and live counts", async () => {
    await page.goto(`${server.url}/console/#/runs/DPL/orders?path=%2Fdemo`);
    await page.locator("#runs tbody tr").first().waitFor();
    assert.equal(await page.locator("#runs tbody tr").count(), 1);
    await page.locator('input[data-filter="status:FAILURE"]').check();
    await page.waitForFunction(() => document.querySelectorAll("#runs tbody tr").length === 0);
    await page.locator('input[data-filter="status:FAILURE"]').uncheck();
    await page.locator("#runs tbody tr").first().waitFor();
    // A run started elsewhere shows up without a reload (the page polls).
    const started = await call("/run", {
      elementName: "orders",
      path: "/demo",
      parameter: { orders: [] },
    });
    assert.equal(started.body.status, true);
    await page.waitForFunction(
      () => document.querySelectorAll("#runs tbody tr").length === 2,
      null,
      { timeout: 10_000 },
    );
    await page.screenshot({ path: path.join(SHOTS, "runs.png") });
  });

  it("terminates a running flow and deactivates a flow", async () => {
    const started = await call("/run", { elementName: "slow", path: "/demo", parameter: {} });
    await page.goto(`${server.url}/console/#/run/${started.body.data}`);
    await page.locator("h1 [data-status='STARTED']").waitFor({ timeout: 10_000 });
    await page.getByRole("button", { name: "Terminate" }).click();
    await page.locator("h1 [data-status='CANCELED']").waitFor({ timeout: 10_000 });
    await page.goto(`${server.url}/console/#/flows`);
    await page.locator('tr[data-flow="slow"] button', { hasText: "Deactivate" }).click();
    await page
      .locator('tr[data-flow="slow"] [data-status="OBSOLETE"]')
      .waitFor({ timeout: 10_000 });
    await page.screenshot({ path: path.join(SHOTS, "flows.png") });
  });

  it("shows a flow's revisions with the live one marked and diffs two side by side", async () => {
    // v2 of orders: a stricter filter in `clean` and a new `audit` vertex after it.
    const v2 = structuredClone(FLOW) as typeof FLOW & { vertexes: { id: string }[] };
    const clean = v2.vertexes[1] as { config: { operators: { expr: string }[] } };
    (clean.config.operators[1] as { expr: string }).expr = "amount > 1";
    v2.vertexes.push({ id: "audit", type: "transform", config: { operators: [] } } as never);
    v2.edges.push({ source: "clean", target: "audit" });
    const d = await call("/flow/deploy", {
      elementName: "orders",
      revisionName: "stricter",
      path: "/demo",
      flow: v2,
      configure: { triggers: [{ type: "manual" }] },
    });
    assert.equal(d.body.status, true, d.text);
    // A fresh document: no toast of an earlier test in the screenshots.
    await page.goto(`${server.url}/console/#/flows`);
    await page.reload();
    await page.locator('a[data-revisions="orders"]').click();
    await page.locator('#revisions tr[data-version="2"] [data-live]').waitFor();
    assert.equal(await page.locator("#revisions [data-live]").count(), 1);
    await page.screenshot({ path: path.join(SHOTS, "revisions.png") });

    await page.locator('input[data-pick="1"]').check();
    await page.locator('input[data-pick="2"]').check();
    await page.locator("#compare").click();
    await page.locator('#diff-vertexes tr[data-diff="audit"][data-mark="added"]').waitFor();
    assert.equal(
      await page.locator('#diff-vertexes tr[data-diff="clean"]').getAttribute("data-mark"),
      "changed",
    );
    assert.match(
      (await page.locator('#diff-vertexes tr[data-diff="clean"]').textContent()) ?? "",
      /\/config\/operators\/1\/expr/,
    );
    assert.equal(
      await page.locator('#diff-edges tr[data-diff="clean->audit"]').getAttribute("data-mark"),
      "added",
    );
    assert.equal(
      await page.locator('#diff-vertexes tr[data-diff="score"]').getAttribute("data-mark"),
      "same",
    );
    assert.equal(
      await page.locator('#diff-configure tr[data-diff="configure"]').getAttribute("data-mark"),
      "changed",
    );
    await page.screenshot({ path: path.join(SHOTS, "diff.png"), fullPage: true });
  });

  it("rolls a flow back to version 1 after a confirmation dialog; cancel changes nothing", async () => {
    await page.goto(`${server.url}/console/#/revisions/orders?path=%2Fdemo`);
    await page.locator('#revisions tr[data-version="2"] [data-live]').waitFor();
    await page.locator('button[data-activate="1"]').click();
    await page.locator("dialog#confirm").waitFor();
    assert.match(
      (await page.locator("dialog#confirm").textContent()) ?? "",
      /Roll back orders to v1/,
    );
    await page.screenshot({ path: path.join(SHOTS, "rollback.png") });
    await page.locator('dialog#confirm [data-confirm="no"]').click();
    await page.locator("dialog#confirm").waitFor({ state: "detached" });
    assert.equal(
      (await call("/flow/revisions", revisionsOf("orders"))).body.data.element.releaseVersion,
      2,
    );

    await page.locator('button[data-activate="1"]').click();
    await page.locator('dialog#confirm [data-confirm="yes"]').click();
    await page.locator('#revisions tr[data-version="1"] [data-live]').waitFor({ timeout: 10_000 });
    const run = await call("/run-sync", {
      elementName: "orders",
      path: "/demo",
      parameter: { orders: [{ amount: 1 }] },
    });
    // v1 keeps amount 1 (filter amount > 0); v2 would have dropped it.
    assert.deepEqual(run.body.data, [{ amount: 1, score: 2 }]);
    const history = await call("/flow/releases", revisionsOf("orders"));
    assert.deepEqual(
      [
        history.body.data.items[0].action,
        history.body.data.items[0].version,
        history.body.data.items[0].userId,
      ],
      ["ROLLBACK", 1, "alice"],
    );
  });

  it("shows the script versions a run used", async () => {
    const internal = {
      app: ID.app,
      space: ID.space,
      user: ID.user,
      token: signToken("internal-secret", ID, Math.floor(Date.now() / 1000)),
    };
    const up = await upload(
      server,
      [{ name: "double.py", content: "def main(p):\n    return p['n'] * 2\n" }],
      { path: "/demo" },
      internal,
    );
    assert.equal(up.body.data[0].status, 0, up.text);
    const flow = {
      vertexes: [
        { id: "in", type: "input" },
        {
          id: "double",
          type: "script",
          config: { element: { elementName: "double", path: "/demo" } },
        },
        { id: "out", type: "output" },
      ],
      edges: [
        { source: "in", target: "double" },
        { source: "double", target: "out" },
      ],
    };
    const d = await call("/flow/deploy", {
      elementName: "doubler",
      revisionName: "first",
      path: "/demo",
      flow,
      configure: {},
    });
    assert.equal(d.body.status, true, d.text);
    await call("/flow/activate", { elementName: "doubler", path: "/demo" });
    const run = await call("/run-sync", {
      elementName: "doubler",
      path: "/demo",
      parameter: { n: 4 },
    });
    assert.equal(run.body.data, 8, run.text);
    await page.goto(`${server.url}/console/#/run/${run.headers.get("x-run-id")}`);
    await page.reload();
    const row = page.locator('#run-scripts tr[data-script-node="double"]');
    await row.waitFor({ timeout: 10_000 });
    assert.match((await row.textContent()) ?? "", /\/demo\/double.*v1.*pinned/);
    await page.screenshot({ path: path.join(SHOTS, "run-scripts.png"), fullPage: true });
  });

  it("answers 401 to the API without the cookie", async () => {
    const r = await server.call("GET", `${DF}/monitor/flows`);
    assert.equal(r.body.code, 401);
  });
});
