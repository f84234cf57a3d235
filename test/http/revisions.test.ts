import assert from "node:assert/strict";
import { createHash } from "node:crypto";
import { after, before, describe, it } from "node:test";
import { DF } from "../helpers/flows.ts";
import {
  OTHER_SCOPE,
  scopeHeaders,
  startServer,
  type TestServer,
  upload,
} from "../helpers/server.ts";
import { makeZip } from "../helpers/zip.ts";

/** input → calc (answers {v: n}) → output: each version's result tells which graph ran. */
const flowV = (n: number) => ({
  vertexes: [
    { id: "in", type: "input" },
    {
      id: "calc",
      type: "transform",
      config: { operators: [{ id: "e", type: "expr", expr: `{'v': ${n}}` }] },
    },
    { id: "out", type: "output" },
  ],
  edges: [
    { source: "in", target: "calc" },
    { source: "calc", target: "out" },
  ],
});

/** input → score (the PY element `score` in /rev) → output. */
const SCRIPT_FLOW = {
  vertexes: [
    { id: "in", type: "input" },
    { id: "score", type: "script", config: { element: { elementName: "score", path: "/rev" } } },
    { id: "out", type: "output" },
  ],
  edges: [
    { source: "in", target: "score" },
    { source: "score", target: "out" },
  ],
};
const scoreV = (n: number) => `def main(p):\n    return {'score': ${n}}\n`;

describe("revisions, releases and script versions (docs/dataflow-service.md)", () => {
  let server: TestServer;
  const h = scopeHeaders();
  const other = scopeHeaders(OTHER_SCOPE);
  const df = (p: string, body: unknown, headers: Record<string, string> = h) =>
    server.call("POST", DF + p, { headers, body });
  const sc = (p: string, body: unknown, headers: Record<string, string> = h) =>
    server.call("POST", `${server.config.scriptPrefix}${p}`, { headers, body });
  const deploy = async (name: string, flow: unknown, extra: Record<string, unknown> = {}) => {
    const r = await df("/flow/deploy", {
      elementName: name,
      revisionName: `r-${JSON.stringify(extra)}-${Date.now()}`,
      path: "/rev",
      flow,
      configure: {},
      ...extra,
    });
    assert.equal(r.body.status, true, r.text);
    assert.ok(!r.body.data.some((x: { severity: number }) => x.severity === 2), r.text);
  };
  const activate = async (name: string, version?: number) => {
    const r = await df("/flow/activate", {
      elementName: name,
      path: "/rev",
      ...(version ? { version } : {}),
    });
    assert.equal(r.body.data, "APPROVED", r.text);
  };
  const runSync = async (name: string) => {
    const r = await df("/run-sync", { elementName: name, path: "/rev", parameter: {} });
    assert.equal(r.body.status, true, r.text);
    return { value: r.body.data, runId: r.headers.get("x-run-id") ?? "" };
  };
  const detail = async (runId: string) =>
    (await server.call("GET", `${DF}/monitor/run-detail?runId=${runId}`, { headers: h })).body.data;

  before(async () => {
    server = await startServer();
  });
  after(() => server.close());

  it("rollback to version 1 makes /run execute version 1's graph; version 3 stays readable", async () => {
    await deploy("roll", flowV(1));
    await activate("roll");
    await deploy("roll", flowV(2));
    await deploy("roll", flowV(3));
    assert.deepEqual((await runSync("roll")).value, { v: 3 });

    await activate("roll", 1);
    const { value, runId } = await runSync("roll");
    assert.deepEqual(value, { v: 1 });
    assert.equal((await detail(runId)).run.version, "1");
    // A queued run too: /run, then its result.
    const queued = await df("/run", { elementName: "roll", path: "/rev", parameter: {} });
    const result = await server.call("GET", `${DF}/run/${queued.body.data}/result?timeout=30`, {
      headers: h,
    });
    assert.deepEqual(result.body.data, { v: 1 });

    const v3 = await df("/flow/revision", { elementName: "roll", path: "/rev", version: 3 });
    assert.deepEqual(v3.body.data.flow, flowV(3));
    assert.deepEqual(v3.body.data.configure, {});
    assert.deepEqual(
      [v3.body.data.stage, v3.body.data.live, v3.body.data.status],
      ["past", false, "OBSOLETE"],
    );

    const list = await df("/flow/revisions", {
      elementName: "roll",
      path: "/rev",
      pageNo: 0,
      pageSize: 2,
    });
    const page = list.body.data;
    assert.deepEqual(
      [page.totalCount, page.totalPage, page.element.releaseVersion, page.element.status],
      [3, 2, 1, "APPROVED"],
    );
    assert.deepEqual(
      page.items.map((r: { version: number; stage: string; live: boolean }) => [
        r.version,
        r.stage,
        r.live,
      ]),
      [
        [3, "past", false],
        [2, "past", false],
      ],
    );
    const rest = await df("/flow/revisions", {
      elementName: "roll",
      path: "/rev",
      pageNo: 1,
      pageSize: 2,
    });
    const v1 = rest.body.data.items[0];
    assert.deepEqual(
      [v1.version, v1.live, v1.status, v1.deployedBy],
      [1, true, "APPROVED", "alice"],
    );

    const history = await df("/flow/releases", {
      elementName: "roll",
      path: "/rev",
      pageNo: 0,
      pageSize: 10,
    });
    assert.deepEqual(
      history.body.data.items.map((e: { action: string; version: number; status: string }) => [
        e.action,
        e.version,
        e.status,
      ]),
      [
        ["ROLLBACK", 1, "APPROVED"],
        ["DEPLOY", 3, "APPROVED"],
        ["DEPLOY", 2, "APPROVED"],
        ["ACTIVATE", 1, "APPROVED"],
        ["DEPLOY", 1, "DRAFT"],
      ],
    );
    assert.ok(history.body.data.items.every((e: { userId: string }) => e.userId === "alice"));

    await df("/flow/deactivate", { elementName: "roll", path: "/rev" });
    const after = await df("/flow/releases", {
      elementName: "roll",
      path: "/rev",
      pageNo: 0,
      pageSize: 1,
    });
    assert.deepEqual(
      [
        after.body.data.items[0].action,
        after.body.data.items[0].version,
        after.body.data.items[0].status,
      ],
      ["DEACTIVATE", 1, "OBSOLETE"],
    );
    const missing = await df("/flow/activate", { elementName: "roll", path: "/rev", version: 9 });
    assert.deepEqual([missing.body.status, missing.body.code], [false, 28010004]);
  });

  it("a staged deploy (release: false) does not change what /run executes until activated", async () => {
    await deploy("staged", flowV(1));
    await activate("staged");
    await deploy("staged", flowV(2), { release: false });
    assert.deepEqual((await runSync("staged")).value, { v: 1 });
    const list = await df("/flow/revisions", {
      elementName: "staged",
      path: "/rev",
      pageNo: 0,
      pageSize: 10,
    });
    assert.deepEqual(
      list.body.data.items.map((r: { version: number; stage: string; status: string }) => [
        r.version,
        r.stage,
        r.status,
      ]),
      [
        [2, "staged", "DRAFT"],
        [1, "release", "APPROVED"],
      ],
    );
    // Activate without a version keeps today's meaning: the current release.
    await activate("staged");
    assert.deepEqual((await runSync("staged")).value, { v: 1 });
    await activate("staged", 2);
    const { value, runId } = await runSync("staged");
    assert.deepEqual(value, { v: 2 });
    assert.equal((await detail(runId)).run.version, "2");

    // A new element deployed staged has no release: runs are refused; activate releases its newest.
    await deploy("fresh", flowV(7), { release: false });
    const refused = await df("/run-sync", { elementName: "fresh", path: "/rev", parameter: {} });
    assert.equal(refused.body.code, 28020001);
    await activate("fresh");
    assert.deepEqual((await runSync("fresh")).value, { v: 7 });
  });

  it("an overwrite of a script does not change a released flow's result until re-activation", async () => {
    const up = await upload(server, [{ name: "score.py", content: scoreV(1) }], { path: "/rev" });
    assert.equal(up.body.data[0].status, 0, up.text);
    await deploy("scored", SCRIPT_FLOW);
    await activate("scored");
    const first = await runSync("scored");
    assert.deepEqual(first.value, { score: 1 });

    const over = await upload(server, [{ name: "score.py", content: scoreV(2) }], {
      path: "/rev",
      overwrite: "true",
    });
    assert.equal(over.body.data[0].message, "overwritten", over.text);
    const pinned = await runSync("scored");
    assert.deepEqual(pinned.value, { score: 1 });
    const sha1 = createHash("sha256").update(scoreV(1)).digest("hex");
    assert.deepEqual((await detail(pinned.runId)).scripts, [
      {
        nodeId: "score",
        elementId: (await detail(pinned.runId)).scripts[0].elementId,
        elementName: "score",
        path: "/rev",
        version: 1,
        sha256: sha1,
        pinned: true,
        environment: null,
      },
    ]);

    // Direct script runs use the newest version unless one is asked for.
    const direct = await sc("/script/run-sync", { elementName: "score", path: "/rev" });
    assert.deepEqual(direct.body.data, { score: 2 });
    const old = await sc("/script/run-sync", { elementName: "score", path: "/rev", version: 1 });
    assert.deepEqual(old.body.data, { score: 1 });
    const ext = await server.call(
      "POST",
      `${server.config.scriptPrefix}/external/score/run-sync?path=%2Frev&version=1`,
      { headers: h, body: {} },
    );
    assert.deepEqual(ext.body, { score: 1 });
    const none = await sc("/script/run-sync", { elementName: "score", path: "/rev", version: 5 });
    assert.deepEqual([none.body.status, none.body.code], [false, 28030006]);

    await activate("scored");
    const repinned = await runSync("scored");
    assert.deepEqual(repinned.value, { score: 2 });
    const d = await detail(repinned.runId);
    assert.deepEqual([d.scripts[0].version, d.scripts[0].pinned], [2, true]);
    const rev = await df("/flow/revision", { elementName: "scored", path: "/rev", version: 1 });
    assert.equal(rev.body.data.scriptPins[0].version, 2);

    const versions = await sc("/script/element/versions", {
      elementName: "score",
      path: "/rev",
      pageNo: 0,
      pageSize: 10,
    });
    assert.deepEqual(
      versions.body.data.items.map((v: { version: number; sha256: string; size: number }) => [
        v.version,
        v.sha256,
        v.size,
      ]),
      [
        [2, createHash("sha256").update(scoreV(2)).digest("hex"), scoreV(2).length],
        [1, sha1, scoreV(1).length],
      ],
    );
    assert.equal(versions.body.data.items[0].uploadedBy, "alice");
    const v1 = await sc("/script/element/version", {
      elementName: "score",
      path: "/rev",
      version: 1,
    });
    assert.deepEqual([v1.body.data.kind, v1.body.data.source], ["module", scoreV(1)]);
  });

  it("reads a package version back as its file list and entry file", async () => {
    const main = "def main(p):\n    return 'pkg'\n";
    const zip = makeZip([
      { name: "app/main.py", content: main },
      { name: "app/util.py", content: "X = 1\n" },
    ]);
    const up = await upload(server, [{ name: "pkg.zip", content: zip }], { path: "/rev" });
    assert.equal(up.body.data[0].status, 0, up.text);
    const v = await sc("/script/element/version", { elementName: "pkg", path: "/rev" });
    assert.deepEqual(
      [v.body.data.version, v.body.data.kind, v.body.data.entry, v.body.data.files],
      [
        1,
        "package",
        { name: "app/main.py", source: main },
        [
          { name: "app/main.py", size: main.length },
          { name: "app/util.py", size: 6 },
        ],
      ],
    );
  });

  it("diffs two revisions: exactly what was added, removed and changed", async () => {
    const from = flowV(1);
    const to = {
      vertexes: [
        from.vertexes[0],
        {
          id: "calc",
          type: "transform",
          config: { operators: [{ id: "e", type: "expr", expr: "{'v': 2}" }] },
        },
        { id: "extra", type: "transform", config: { operators: [] } },
        { id: "out", type: "output" },
      ],
      edges: [
        { source: "in", target: "calc" },
        { source: "calc", target: "extra" },
        { source: "extra", target: "out" },
      ],
    };
    await deploy("diffed", from);
    await df("/flow/deploy", {
      elementName: "diffed",
      revisionName: "second",
      path: "/rev",
      flow: to,
      configure: { runNameTemplate: "d-${runId}" },
      release: false,
    });
    const r = await df("/flow/revision-diff", {
      elementName: "diffed",
      path: "/rev",
      fromVersion: 1,
      toVersion: 2,
    });
    assert.equal(r.body.status, true, r.text);
    const { element, from: f, to: t, ...diff } = r.body.data;
    assert.deepEqual(
      [element.elementName, f.version, t.version, t.revisionName],
      ["diffed", 1, 2, "second"],
    );
    assert.deepEqual(diff, {
      vertexes: {
        added: [{ id: "extra", type: "transform" }],
        removed: [],
        changed: [{ id: "calc", type: "transform", paths: ["/config/operators/0/expr"] }],
      },
      edges: {
        added: [
          { key: "calc->extra", source: "calc", target: "extra" },
          { key: "extra->out", source: "extra", target: "out" },
        ],
        removed: [{ key: "calc->out", source: "calc", target: "out" }],
        changed: [],
      },
      configure: { changed: ["/runNameTemplate"] },
    });
    const same = await df("/flow/revision-diff", {
      elementName: "diffed",
      path: "/rev",
      fromVersion: 2,
      toVersion: 2,
    });
    assert.deepEqual(same.body.data.configure, { changed: [] });
    const gone = await df("/flow/revision-diff", {
      elementName: "diffed",
      path: "/rev",
      fromVersion: 1,
      toVersion: 4,
    });
    assert.deepEqual([gone.body.status, gone.body.code], [false, 28010004]);
  });

  it("answers another scope's flows and scripts as not existing on every new endpoint", async () => {
    const loc = { elementName: "roll", path: "/rev" };
    const page = { pageNo: 0, pageSize: 10 };
    for (const [p, body] of [
      ["/flow/revisions", { ...loc, ...page }],
      ["/flow/revision", { ...loc, version: 1 }],
      ["/flow/revision-diff", { ...loc, fromVersion: 1, toVersion: 2 }],
      ["/flow/releases", { ...loc, ...page }],
      ["/flow/activate", { ...loc, version: 1 }],
    ] as const) {
      const r = await df(p, body, other);
      assert.deepEqual([p, r.body.status, r.body.code], [p, false, 28010001], r.text);
    }
    const id = (await df("/flow/revisions", { ...loc, ...page })).body.data.element.elementId;
    const byId = await df("/flow/revision", { elementId: id, version: 1 }, other);
    assert.equal(byId.body.code, 28010001);
    for (const [p, body] of [
      ["/script/element/versions", { elementName: "score", path: "/rev", ...page }],
      ["/script/element/version", { elementName: "score", path: "/rev", version: 1 }],
      ["/script/run-sync", { elementName: "score", path: "/rev", version: 1 }],
    ] as const) {
      const r = await sc(p, body, other);
      assert.deepEqual([p, r.body.status, r.body.code], [p, false, 28010001], r.text);
    }
  });
});

describe("a run or task accepted before a release change runs what it was accepted with", () => {
  let server: TestServer;
  const h = scopeHeaders();
  const df = (p: string, body: unknown) => server.call("POST", DF + p, { headers: h, body });
  const sc = (p: string, body: unknown) =>
    server.call("POST", `${server.config.scriptPrefix}${p}`, { headers: h, body });
  const SLOW = {
    vertexes: [
      { id: "in", type: "input" },
      {
        id: "nap",
        type: "script",
        config: { code: "import time\ndef main(p):\n    time.sleep(120)\n" },
      },
    ],
    edges: [{ source: "in", target: "nap" }],
  };
  const status = async (id: string) =>
    (await server.call("GET", `${DF}/monitor/run?runId=${id}`, { headers: h })).body.data;

  before(async () => {
    // One lane each: a run or task queued behind a slow one stays QUEUED until it is terminated.
    server = await startServer({
      FLOW_CONCURRENCY: "1",
      SCRIPT_CONCURRENCY: "1",
      SCRIPT_PREFORK: "1",
    });
  });
  after(() => server.close());

  it("a flow run queued before a rollback runs the version it was accepted with", async () => {
    for (const [name, flow] of [
      ["slow", SLOW],
      ["q", flowV(1)],
      ["q", flowV(2)],
    ] as const) {
      const d = await df("/flow/deploy", {
        elementName: name,
        revisionName: "r",
        path: "/q",
        flow,
        configure: {},
      });
      assert.equal(d.body.status, true, d.text);
    }
    for (const name of ["slow", "q"])
      assert.equal(
        (await df("/flow/activate", { elementName: name, path: "/q" })).body.data,
        "APPROVED",
      );
    const slow = (await df("/run", { elementName: "slow", path: "/q", parameter: {} })).body.data;
    const queued = (await df("/run", { elementName: "q", path: "/q", parameter: {} })).body.data;
    assert.deepEqual(
      [(await status(queued)).runStatus, (await status(queued)).version],
      ["QUEUED", "2"],
    );
    assert.equal(
      (await df("/flow/activate", { elementName: "q", path: "/q", version: 1 })).body.data,
      "APPROVED",
    );
    assert.equal((await df("/run/terminate", { runIds: [slow] })).body.data[slow], true);
    const result = await server.call("GET", `${DF}/run/${queued}/result?timeout=60`, {
      headers: h,
    });
    assert.deepEqual(result.body.data, { v: 2 }, result.text);
    const now = await df("/run-sync", { elementName: "q", path: "/q", parameter: {} });
    assert.deepEqual(now.body.data, { v: 1 });
  });

  it("a script task queued before an overwrite runs the version it was accepted with", async () => {
    const up = await upload(
      server,
      [
        { name: "nap.py", content: "import time\ndef main(p):\n    time.sleep(120)\n" },
        { name: "ver.py", content: scoreV(1) },
      ],
      { path: "/q" },
    );
    assert.ok(
      up.body.data.every((i: { status: number }) => i.status === 0),
      up.text,
    );
    const nap = (await sc("/script/run", { elementName: "nap", path: "/q" })).body.data;
    const task = (await sc("/script/run", { elementName: "ver", path: "/q" })).body.data;
    assert.deepEqual(
      [(await status(task)).runStatus, (await status(task)).version],
      ["QUEUED", "1"],
    );
    const over = await upload(server, [{ name: "ver.py", content: scoreV(2) }], {
      path: "/q",
      overwrite: "true",
    });
    assert.equal(over.body.data[0].message, "overwritten");
    assert.equal((await df("/run/terminate", { runIds: [nap] })).body.data[nap], true);
    const result = await server.call(
      "GET",
      `${server.config.scriptPrefix}/script/result/${task}?timeout=60`,
      { headers: h },
    );
    assert.deepEqual(result.body.data, { score: 1 }, result.text);
  });
});
