import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { DF } from "../helpers/flows.ts";
import { scopeHeaders, startServer, type TestServer, upload } from "../helpers/server.ts";

/**
 * What one app may hold (docs/security.md, "What an app may hold"), as an attacker used it: any
 * number of new flow names and scripts, each with its own bound of revisions or versions, and any
 * number of active cron schedules across its flows. Now `LIMIT_ELEMENTS_PER_APP` bounds its
 * elements (flows and scripts together, every space of the app) and `LIMIT_SCHEDULES_PER_APP` its
 * active schedules; each path that creates an element or makes schedules active is refused past
 * them, exactly under concurrency, and another app is not affected. In both modes.
 */

const ELEMENTS = 6;
const SCHEDULES = 4;

const FLOW = {
  vertexes: [
    { id: "in", type: "input" },
    { id: "out", type: "output" },
  ],
  edges: [{ source: "in", target: "out" }],
};
/** `n` cron triggers that fire once a year: none fires during the test. */
const crons = (n: number) => ({
  triggers: Array.from({ length: n }, (_, i) => ({
    type: "cron",
    name: `t${i}`,
    crontab: "0 0 1 1 *",
  })),
});

describe("what an app may hold (LIMIT_ELEMENTS_PER_APP, LIMIT_SCHEDULES_PER_APP)", () => {
  let server: TestServer;
  const headersOf = (app: string, space = "s1") => scopeHeaders({ app, space, user: "u" });
  const df = (h: Record<string, string>, p: string, body: unknown) =>
    server.call("POST", DF + p, { headers: h, body });
  const deploy = (h: Record<string, string>, name: string, configure: unknown = {}, rev = "r") =>
    df(h, "/flow/deploy", {
      elementName: name,
      path: "/q",
      revisionName: rev,
      flow: FLOW,
      configure,
    });
  const deployOk = async (h: Record<string, string>, name: string, configure: unknown = {}) => {
    const r = await deploy(h, name, configure);
    assert.equal(r.body.code, 0, `deploy of ${name}: ${r.text}`);
    assert.ok(!r.body.data.some((x: { severity: number }) => x.severity === 2), r.text);
  };
  const activate = (h: Record<string, string>, name: string) =>
    df(h, "/flow/activate", { elementName: name, path: "/q" });
  const status = async (h: Record<string, string>, name: string) => {
    const [el] = await server.services.store.findElements(
      { app: h.app as string, space: h.space as string },
      { type: "DPL", name },
    );
    return el?.status;
  };
  const count = async (app: string) => {
    const db = (server.services.store as unknown as { db: import("kysely").Kysely<never> }).db;
    const { sql } = await import("kysely");
    const r = await sql<{
      n: number | string;
    }>`select count(*) as n from elements where app = ${app}`.execute(db);
    return Number(r.rows[0]?.n);
  };

  before(async () => {
    server = await startServer({
      LIMIT_ELEMENTS_PER_APP: String(ELEMENTS),
      LIMIT_SCHEDULES_PER_APP: String(SCHEDULES),
    });
  });
  after(() => server.close());

  it("an app creating elements past the bound is refused, naming the setting; revisions of its elements, and other apps, are not", async () => {
    const h = headersOf("fill");
    for (let i = 0; i < 3; i++) await deployOk(h, `f${i}`);
    const up = await upload(
      server,
      [
        { name: "s0.py", content: "def main(p):\n    return 0\n" },
        { name: "s1.py", content: "def main(p):\n    return 1\n" },
      ],
      { path: "/q" },
      h,
    );
    assert.deepEqual(
      up.body.data.map((i: { status: number }) => i.status),
      [0, 0],
      up.text,
    );
    // Another space of the same app counts towards the same bound: the sixth element.
    await deployOk(headersOf("fill", "s2"), "other-space");

    const refused = await deploy(h, "f-next");
    assert.deepEqual([refused.body.status, refused.body.code], [false, 28010006], refused.text);
    assert.match(refused.body.message, /fill holds 6 elements.*LIMIT_ELEMENTS_PER_APP/);
    assert.equal(await status(h, "f-next"), undefined);
    const zh = await server.call("POST", `${DF}/flow/deploy`, {
      headers: { ...h, language: "zh-cn" },
      body: { elementName: "f-zh", path: "/q", revisionName: "r", flow: FLOW, configure: {} },
    });
    assert.equal(zh.body.code, 28010006);
    assert.match(zh.body.message, /LIMIT_ELEMENTS_PER_APP/);
    assert.doesNotMatch(zh.body.message, /holds/);

    const upRefused = await upload(
      server,
      [{ name: "s2.py", content: "def main(p):\n    return 2\n" }],
      { path: "/q" },
      h,
    );
    assert.equal(upRefused.body.code, 0, upRefused.text);
    assert.equal(upRefused.body.data[0].status, 3, upRefused.text);
    assert.match(upRefused.body.data[0].message, /LIMIT_ELEMENTS_PER_APP/);
    assert.equal(await count("fill"), ELEMENTS);

    // New revisions of existing elements are still accepted.
    const again = await deploy(h, "f0", {}, "r2");
    assert.equal(again.body.code, 0, again.text);
    const overwrite = await upload(
      server,
      [{ name: "s0.py", content: "def main(p):\n    return 10\n" }],
      { path: "/q", overwrite: "true" },
      h,
    );
    assert.equal(overwrite.body.data[0].status, 0, overwrite.text);
    assert.equal(overwrite.body.data[0].message, "overwritten");

    // Another app is not affected.
    await deployOk(headersOf("bystander"), "b0");
    assert.equal(await count("fill"), ELEMENTS);
  });

  it("concurrent creates at the bound: exactly one passes", async () => {
    const h = headersOf("race");
    for (let i = 0; i < ELEMENTS - 1; i++) await deployOk(h, `r${i}`);
    const answers = await Promise.all(Array.from({ length: 8 }, (_, i) => deploy(h, `new${i}`)));
    const codes = answers.map((a) => a.body.code).sort();
    assert.deepEqual(codes, [0, ...Array(7).fill(28010006)], answers.map((a) => a.text).join("\n"));
    assert.equal(await count("race"), ELEMENTS);
  });

  it("an import that would create elements past the bound is refused and writes nothing", async () => {
    const src = headersOf("exporter");
    for (let i = 0; i < 3; i++) await deployOk(src, `e${i}`);
    const exported = await df(src, "/export", { path: "/q" });
    assert.equal(exported.body.code, 0, exported.text);
    const h = headersOf("importer");
    for (let i = 0; i < ELEMENTS - 2; i++) await deployOk(h, `i${i}`);
    const r = await df(h, "/import", { bundle: exported.body.data });
    assert.equal(r.body.code, 28010006, r.text);
    assert.match(r.body.message, /LIMIT_ELEMENTS_PER_APP/);
    assert.equal(await count("importer"), ELEMENTS - 2);
  });

  it("schedules past the bound: an activate or a releasing deploy that would take the app over it is refused", async () => {
    const h = headersOf("cron");
    await deployOk(h, "a", crons(3));
    assert.equal((await activate(h, "a")).body.data, "APPROVED");
    await deployOk(h, "b", crons(2)); // DRAFT: not active, not counted
    const refused = await activate(h, "b");
    assert.deepEqual([refused.body.status, refused.body.code], [false, 28010007], refused.text);
    assert.match(refused.body.message, /cron.*5 active schedules.*LIMIT_SCHEDULES_PER_APP \(4\)/);
    assert.equal(await status(h, "b"), "DRAFT");
    // batch-deploy activates the same way, and is refused the same way.
    const batch = await df(h, "/flow/batch-deploy", [{ elementName: "b", path: "/q" }]);
    assert.equal(batch.body.data[0].result, "ERROR", batch.text);
    assert.match(batch.body.data[0].message, /LIMIT_SCHEDULES_PER_APP/);

    // A releasing deploy of the APPROVED flow is checked too; its staged deploy is not active.
    const more = await deploy(h, "a", crons(5), "r2");
    assert.equal(more.body.code, 28010007, more.text);
    const four = await deploy(h, "a", crons(4), "r3");
    assert.equal(four.body.code, 0, four.text);
    const staged = await df(h, "/flow/deploy", {
      elementName: "a",
      path: "/q",
      revisionName: "staged",
      flow: FLOW,
      configure: crons(6),
      release: false,
    });
    assert.equal(staged.body.code, 0, staged.text);

    // Deactivating makes room.
    assert.equal(
      (await df(h, "/flow/deactivate", { elementName: "a", path: "/q" })).body.data,
      "OBSOLETE",
    );
    assert.equal((await activate(h, "b")).body.data, "APPROVED");

    // Another app is not affected.
    const other = headersOf("cron-bystander");
    await deployOk(other, "c", crons(4));
    assert.equal((await activate(other, "c")).body.data, "APPROVED");

    // An import of an APPROVED flow with cron triggers makes them active: checked the same way.
    const exported = await df(other, "/export", { path: "/q" });
    assert.equal(exported.body.code, 0, exported.text);
    const imported = await df(h, "/import", { bundle: exported.body.data });
    assert.equal(imported.body.code, 28010007, imported.text);
    assert.equal(await status(h, "c"), undefined);
  });

  it("a dry run of an import answers what the import would: refused past either bound, the plan within them", async () => {
    const dry = (h: Record<string, string>, bundle: unknown) =>
      df(h, "/import", { bundle, dryRun: true });
    const exportOf = async (h: Record<string, string>) => {
      const r = await df(h, "/export", { path: "/q" });
      assert.equal(r.body.code, 0, r.text);
      return r.body.data;
    };
    // Elements: three new ones fit an app holding three, not one holding four.
    const src = headersOf("dry-src");
    for (let i = 0; i < 3; i++) await deployOk(src, `e${i}`);
    const three = await exportOf(src);
    const h = headersOf("dry-elements");
    for (let i = 0; i < ELEMENTS - 3; i++) await deployOk(h, `i${i}`);
    const fits = await dry(h, three);
    assert.equal(fits.body.code, 0, fits.text);
    assert.equal(fits.body.data.dryRun, true);
    assert.equal(fits.body.data.created.length, 3, fits.text);
    await deployOk(h, "one-more");
    const over = await dry(h, three);
    assert.equal(over.body.code, 28010006, over.text);
    assert.match(over.body.message, /holds 4 elements.*LIMIT_ELEMENTS_PER_APP allows 6/);
    assert.equal((await df(h, "/import", { bundle: three })).body.code, 28010006);
    assert.equal(await count("dry-elements"), ELEMENTS - 2);

    // Schedules: an APPROVED flow's cron triggers, new or moved to a release with more of them.
    const cs = headersOf("dry-cron-src");
    await deployOk(cs, "c", crons(1));
    assert.equal((await activate(cs, "c")).body.data, "APPROVED");
    const oneCron = await exportOf(cs);
    const t = headersOf("dry-cron");
    await deployOk(t, "a", crons(3));
    assert.equal((await activate(t, "a")).body.data, "APPROVED");
    const within = await dry(t, oneCron);
    assert.equal(within.body.code, 0, within.text);
    assert.equal(within.body.data.created.length, 1, within.text);
    assert.equal((await df(t, "/import", { bundle: oneCron })).body.code, 0); // 4 active
    await deployOk(cs, "c", crons(2)); // its release moves: 2 triggers
    const moved = await exportOf(cs);
    const movedDry = await dry(t, moved);
    assert.equal(movedDry.body.code, 28010007, movedDry.text);
    assert.match(movedDry.body.message, /5 active schedules.*LIMIT_SCHEDULES_PER_APP \(4\)/);
    assert.equal((await df(t, "/import", { bundle: moved })).body.code, 28010007);
    // Back to one trigger: the release it replaces counted off, the app stays at 4.
    await deployOk(cs, "c", crons(1));
    const back = await exportOf(cs);
    const backDry = await dry(t, back);
    assert.equal(backDry.body.code, 0, backDry.text);
    assert.equal(backDry.body.data.updated.length, 1, backDry.text);
    assert.equal((await df(t, "/import", { bundle: back })).body.code, 0);
    const ds = headersOf("dry-cron-src2");
    await deployOk(ds, "d", crons(1));
    assert.equal((await activate(ds, "d")).body.data, "APPROVED");
    const newFlow = await dry(t, await exportOf(ds));
    assert.equal(newFlow.body.code, 28010007, newFlow.text);
    assert.equal(await status(t, "d"), undefined);
  });

  it("concurrent activates at the schedule bound: exactly one passes", async () => {
    const h = headersOf("cron-race");
    for (let i = 0; i < 4; i++) await deployOk(h, `c${i}`, crons(3));
    const answers = await Promise.all([0, 1, 2, 3].map((i) => activate(h, `c${i}`)));
    const codes = answers.map((a) => a.body.code).sort();
    assert.deepEqual(
      codes,
      [0, 28010007, 28010007, 28010007],
      answers.map((a) => a.text).join("\n"),
    );
  });
});
