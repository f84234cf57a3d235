import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { DF, deployAndActivate } from "../helpers/flows.ts";
import {
  OTHER_SCOPE,
  scopeHeaders,
  startServer,
  type TestServer,
  upload,
} from "../helpers/server.ts";

const PARAM = {
  orders: [
    { amount: 2, qty: 3 },
    { amount: 5, qty: 1 },
  ],
};

function scored(factor: number, scriptLocator: Record<string, unknown>) {
  return {
    vertexes: [
      { id: "in", type: "input", config: { schema: { type: "object", required: ["orders"] } } },
      {
        id: "clean",
        type: "transform",
        config: {
          operators: [
            { id: "o", type: "expr", expr: "orders" },
            { id: "m", type: "map", fields: { total: `amount * qty * ${factor}` } },
          ],
        },
      },
      { id: "score", type: "script", config: { element: scriptLocator } },
      { id: "out", type: "output" },
    ],
    edges: [
      { source: "in", target: "clean" },
      { source: "clean", target: "score" },
      { source: "score", target: "out" },
    ],
  };
}

describe("export and import", () => {
  let source: TestServer;
  let target: TestServer;
  const h = scopeHeaders();
  const other = scopeHeaders(OTHER_SCOPE);
  const on = (s: TestServer, p: string, body: unknown, headers: Record<string, string> = h) =>
    s.call("POST", DF + p, { headers, body });
  const runSync = async (s: TestServer, elementName: string, headers = h) =>
    (await on(s, "/run-sync", { elementName, parameter: PARAM }, headers)).body;
  let scriptId = "";
  let childId = "";

  before(async () => {
    source = await startServer();
    target = await startServer();
    await upload(
      source,
      [
        {
          name: "score.py",
          content: "def main(rows):\n    return [r['total'] + 1 for r in rows]\n",
        },
      ],
      { path: "/ml" },
    );
    const folder = await source.services.store.folderByPath(h, "/ml");
    scriptId =
      (
        await source.services.store.findElements(h, {
          type: "PY",
          name: "score",
          folderId: folder?.id,
        })
      )[0]?.id ?? "";
    await deployAndActivate(
      source,
      "scored",
      scored(1, { elementName: "score", path: "/ml" }),
      {},
      h,
      "/etl",
    );
    await deployAndActivate(
      source,
      "scored",
      scored(10, { elementName: "score", path: "/ml" }),
      {},
      h,
      "/etl",
    );
    // A locator by ID (this installation's) and a sub-flow outside the exported folder.
    await deployAndActivate(
      source,
      "child",
      scored(100, { elementName: "score", elementId: scriptId }),
      {},
      h,
      "/lib",
    );
    const child = await source.services.store.folderByPath(h, "/lib");
    childId =
      (
        await source.services.store.findElements(h, {
          type: "DPL",
          name: "child",
          folderId: child?.id,
        })
      )[0]?.id ?? "";
    await deployAndActivate(
      source,
      "parent",
      {
        vertexes: [
          { id: "in", type: "input" },
          {
            id: "sub",
            type: "subflow",
            config: { element: { elementName: "child", elementId: childId } },
          },
        ],
        edges: [{ source: "in", target: "sub" }],
      },
      {},
      h,
      "/etl/nested",
    );
  });
  after(async () => {
    await source.close();
    await target.close();
  });

  const exportEtl = async (allRevisions = true) => {
    const r = await on(source, "/export", { path: "/etl", allRevisions });
    assert.equal(r.body.code, 0, r.text);
    return r.body.data;
  };

  it("exports a folder with its sub-folders, the sub-flows and scripts its flows use, IDs made portable", async () => {
    const b = await exportEtl();
    assert.equal(b.format, "sluice-export");
    assert.deepEqual(
      b.flows.map((f: { path: string; name: string; revisions: { version: number }[] }) => [
        f.path,
        f.name,
        f.revisions.map((r) => r.version),
      ]),
      [
        ["/etl", "scored", [1, 2]],
        ["/etl/nested", "parent", [1]],
        ["/lib", "child", [1]],
      ],
    );
    assert.deepEqual(b.flows[1].revisions[0].flow.vertexes[1].config.element, {
      elementName: "child",
      path: "/lib",
    });
    assert.deepEqual(b.flows[2].revisions[0].flow.vertexes[2].config.element, {
      elementName: "score",
      path: "/ml",
    });
    assert.deepEqual(
      b.scripts.map((s: { path: string; name: string; kind: string }) => [s.path, s.name, s.kind]),
      [["/ml", "score", "module"]],
    );
    assert.match(Buffer.from(b.scripts[0].content, "base64").toString(), /r\['total'\] \+ 1/);
    const live = await exportEtl(false);
    assert.deepEqual(
      live.flows[0].revisions.map((r: { version: number }) => r.version),
      [2],
    );
  });

  it("imports into an empty installation: the dry run writes nothing, the import reproduces the same results", async () => {
    const bundle = await exportEtl();
    const dry = await on(target, "/import", { bundle, dryRun: true });
    assert.equal(dry.body.code, 0, dry.text);
    assert.equal(dry.body.data.dryRun, true);
    const names = (items: { elementType: string; elementName: string }[]) =>
      items.map((i) => `${i.elementType} ${i.elementName}`);
    assert.deepEqual(names(dry.body.data.created), [
      "PY score",
      "DPL scored",
      "DPL parent",
      "DPL child",
    ]);
    assert.deepEqual(dry.body.data.conflicts, []);
    assert.equal((await runSync(target, "scored")).code, 28010001, "the dry run wrote nothing");

    const done = await on(target, "/import", { bundle });
    assert.equal(done.body.code, 0, done.text);
    assert.deepEqual(done.body.data.created, dry.body.data.created);
    for (const name of ["scored", "parent", "child"]) {
      const want = await runSync(source, name);
      const got = await runSync(target, name);
      assert.equal(got.code, 0, JSON.stringify(got));
      assert.deepEqual(got.data, want.data, name);
    }
    assert.deepEqual((await runSync(target, "scored")).data, [61, 51]);
    const flows = (await target.call("GET", `${DF}/monitor/flows`, { headers: h })).body.data;
    const scoredRow = flows.find(
      (f: { element: { elementName: string } }) => f.element.elementName === "scored",
    );
    assert.deepEqual([scoredRow.status, scoredRow.revision.version], ["APPROVED", "2"]);
  });

  it("a repeated import is a no-op: everything skipped", async () => {
    const bundle = await exportEtl();
    const again = await on(target, "/import", { bundle });
    assert.equal(again.body.code, 0, again.text);
    assert.deepEqual(
      [again.body.data.created, again.body.data.updated, again.body.data.conflicts],
      [[], [], []],
    );
    assert.equal(again.body.data.skipped.length, 4);
    const revs = await target.services.store.allFlowRevisions(
      (await target.services.store.findElements(h, { type: "DPL", name: "scored" }))[0]?.id ?? "",
    );
    assert.deepEqual(
      revs.map((r) => r.version),
      [1, 2],
    );
  });

  it("a conflicting import writes nothing and names the conflict; the dry run lists it", async () => {
    // The target gets its own revision 3; the source a different one, and a new script and flow.
    await deployAndActivate(
      target,
      "scored",
      scored(7, { elementName: "score", path: "/ml" }),
      {},
      h,
      "/etl",
    );
    await deployAndActivate(
      source,
      "scored",
      scored(3, { elementName: "score", path: "/ml" }),
      {},
      h,
      "/etl",
    );
    await upload(source, [{ name: "fresh.py", content: "def main(p):\n    return 'fresh'\n" }], {
      path: "/etl",
    });
    await deployAndActivate(
      source,
      "extra",
      scored(1, { elementName: "fresh", path: "/etl" }),
      {},
      h,
      "/etl",
    );
    const bundle = await exportEtl();
    const dry = await on(target, "/import", { bundle, dryRun: true });
    assert.deepEqual(
      dry.body.data.conflicts.map((c: { elementName: string; reason: string }) => [
        c.elementName,
        c.reason,
      ]),
      [["scored", "revision 3 differs from this space's revision 3"]],
    );
    assert.deepEqual(
      dry.body.data.created.map((c: { elementName: string }) => c.elementName).sort(),
      ["extra", "fresh"],
    );
    const r = await on(target, "/import", { bundle });
    assert.equal(r.body.code, 28040001);
    assert.match(
      r.body.message,
      /nothing was written: 1 conflict .*DPL \/etl\/scored: revision 3 differs/,
    );
    assert.equal(r.body.data, null);
    const store = target.services.store;
    assert.deepEqual(await store.findElements(h, { type: "PY", name: "fresh" }), []);
    assert.deepEqual(await store.findElements(h, { type: "DPL", name: "extra" }), []);
  });

  it("imports into another space of the same installation; a later full export only adds revisions", async () => {
    const live = await exportEtl(false);
    const first = await on(source, "/import", { bundle: live }, other);
    assert.equal(first.body.code, 0, first.text);
    assert.equal((await runSync(source, "scored", other)).code, 0);
    const full = await on(source, "/import", { bundle: await exportEtl() }, other);
    assert.equal(full.body.code, 0, full.text);
    assert.deepEqual(
      full.body.data.updated.map((u: { elementName: string; versions: number[] }) => [
        u.elementName,
        u.versions,
      ]),
      [["scored", [1, 2]]],
    );
    // The source scope is untouched.
    assert.equal(
      (
        await source.services.store.allFlowRevisions(
          (await source.services.store.findElements(h, { type: "DPL", name: "scored" }))[0]?.id ??
            "",
        )
      ).length,
      3,
    );
  });

  it("refuses a file whose flows use a script neither it nor the space holds", async () => {
    const bundle = await exportEtl();
    bundle.scripts = [];
    const fresh = { app: "app9", space: "s9", user: "zoe" };
    const r = await on(target, "/import", { bundle, dryRun: true }, fresh);
    assert.equal(r.body.code, 0, r.text);
    assert.deepEqual(
      r.body.data.conflicts.map((c: { elementName: string; reason: string }) => [
        c.elementName,
        c.reason,
      ]),
      [
        ["extra", "revision 1 uses PY fresh, which neither the file nor this space holds"],
        ["scored", "revision 1 uses PY score, which neither the file nor this space holds"],
        ["child", "revision 1 uses PY score, which neither the file nor this space holds"],
      ],
    );
    assert.equal((await on(target, "/import", { bundle }, fresh)).body.code, 28040001);
  });

  it("an imported script passes the checks of an upload (syntax, size, zip limits)", async () => {
    const bundle = await exportEtl();
    const script = bundle.scripts.find((x: { name: string }) => x.name === "score");
    script.content = Buffer.from("def main(p:\n    return 1\n").toString("base64");
    const fresh = { app: "app8", space: "s8", user: "yan" };
    const r = await on(target, "/import", { bundle, dryRun: true }, fresh);
    assert.equal(r.body.code, 0, r.text);
    const score = r.body.data.conflicts.find(
      (c: { elementType: string }) => c.elementType === "PY",
    );
    assert.match(
      score.reason,
      /^refused as an upload would be: Python syntax error in score\.py line 1/,
    );
    assert.equal((await on(target, "/import", { bundle }, fresh)).body.code, 28040001);
  });

  it("an imported flow's cron trigger is scheduled on the target as after a deploy", async () => {
    await deployAndActivate(
      source,
      "nightly",
      scored(1, { elementName: "score", path: "/ml" }),
      { triggers: [{ type: "cron", name: "n", crontab: "0 2 * * *", parameter: PARAM }] },
      h,
      "/cron",
    );
    const bundle = (await on(source, "/export", { path: "/cron" })).body.data;
    const r = await on(target, "/import", { bundle });
    assert.equal(r.body.code, 0, r.text);
    const flows = (await target.call("GET", `${DF}/monitor/flows`, { headers: h })).body.data;
    const row = flows.find(
      (f: { element: { elementName: string } }) => f.element.elementName === "nightly",
    );
    assert.equal(row.schedule?.crontab, "0 2 * * *");
    assert.ok(row.schedule?.nextRunAt > Date.now());
  });

  it("every new endpoint is scoped: another space sees none of this one's elements", async () => {
    const byPath = await on(
      source,
      "/export",
      { path: "/lib" },
      scopeHeaders({ app: "app1", space: "nowhere", user: "x" }),
    );
    assert.equal(byPath.body.code, 28010003);
    const byName = await on(
      source,
      "/export",
      { elements: [{ elementName: "child" }] },
      scopeHeaders({ app: "app1", space: "nowhere", user: "x" }),
    );
    assert.equal(byName.body.code, 28010001);
    const folder = await source.services.store.folderByPath(h, "/etl");
    const byId = await on(source, "/export", { folderId: folder?.id }, other);
    assert.equal(byId.body.code, 28010003);
    assert.equal((await on(source, "/export", { path: "/etl" }, {})).body.code, 400);
    assert.equal((await on(source, "/import", { bundle: await exportEtl() }, {})).body.code, 400);
    const both = await on(source, "/export", { path: "/etl", elements: [] });
    assert.equal(both.body.code, 400);
  });
});
