import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { DF } from "../helpers/flows.ts";
import { scopeHeaders, startServer, type TestServer } from "../helpers/server.ts";

/**
 * The bound on what a flow keeps (docs/dataflow-service.md, "How many revisions are kept"), as
 * the attacker of docs/security.md used it: every deploy kept a new revision forever. Now a
 * deploy past `LIMIT_REVISIONS_PER_FLOW` (default 100) removes the oldest revisions nothing needs
 * in its own transaction, or is refused when none can go. In both modes.
 */

const LIMIT = 100;

/** input → calc (answers {v: n}) → output: each revision's result tells which graph ran. */
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

describe("revisions kept per flow (LIMIT_REVISIONS_PER_FLOW)", () => {
  let server: TestServer;
  const h = scopeHeaders();
  const df = (p: string, body: unknown) => server.call("POST", DF + p, { headers: h, body });
  const at = (name: string) => ({ elementName: name, path: "/keep" });
  const deploy = (name: string, n: number, release = true) =>
    df("/flow/deploy", {
      ...at(name),
      revisionName: `r${n}`,
      flow: flowV(n),
      configure: { logContent: "DETAILED" },
      release,
    });
  const deployOk = async (name: string, n: number, release = true) => {
    const r = await deploy(name, n, release);
    assert.equal(r.body.code, 0, `deploy ${n} of ${name}: ${r.text}`);
    assert.ok(!r.body.data.some((x: { severity: number }) => x.severity === 2), r.text);
  };
  const activate = async (name: string, version?: number) => {
    const r = await df("/flow/activate", { ...at(name), ...(version ? { version } : {}) });
    assert.equal(r.body.data, "APPROVED", r.text);
  };
  const versions = async (name: string): Promise<number[]> => {
    const r = await df("/flow/revisions", { ...at(name), pageNo: 0, pageSize: 100 });
    assert.equal(r.body.code, 0, r.text);
    assert.ok(r.body.data.totalCount <= 100, "one page holds them all");
    return r.body.data.items.map((i: { version: number }) => i.version);
  };
  const range = (from: number, to: number) =>
    Array.from({ length: to - from + 1 }, (_, i) => to - i);

  before(async () => {
    server = await startServer();
  });
  after(() => server.close());

  it("105 deploys keep 100: the live and the staged revisions stay, the oldest past ones go", async () => {
    await deployOk("hist", 1);
    await activate("hist");
    await deployOk("hist", 2, false); // staged
    for (let n = 3; n <= 50; n++) await deployOk("hist", n);
    await activate("hist", 1); // a rollback: version 1 is live again
    for (let n = 51; n <= 105; n++) await deployOk("hist", n, false);

    // Five revisions had to go: the oldest past ones, 3 to 7.
    assert.deepEqual(await versions("hist"), [...range(8, 105), 2, 1]);
    const live = await df("/flow/revision", { ...at("hist"), version: 1 });
    assert.deepEqual([live.body.data.stage, live.body.data.live], ["release", true]);
    const staged = await df("/flow/revision", { ...at("hist"), version: 2 });
    assert.equal(staged.body.data.stage, "staged");
    const run = await df("/run-sync", { ...at("hist"), parameter: {} });
    assert.deepEqual(run.body.data, { v: 1 });

    // A removed revision reads as one that never was (28010004), everywhere it is named.
    for (const [path, body] of [
      ["/flow/revision", { ...at("hist"), version: 3 }],
      ["/flow/revision", { ...at("hist"), version: 7 }],
      ["/flow/revision-diff", { ...at("hist"), fromVersion: 5, toVersion: 8 }],
      ["/flow/activate", { ...at("hist"), version: 4 }],
    ] as const) {
      const r = await df(path, body);
      assert.equal(r.body.code, 28010004, `${path} ${JSON.stringify(body)}: ${r.text}`);
    }
    // The release history keeps its events, those of removed revisions included.
    const history = await df("/flow/releases", { ...at("hist"), pageNo: 0, pageSize: 100 });
    assert.equal(history.body.data.totalCount, 51); // deploy, activate, 48 deploys, rollback
    assert.ok(history.body.data.items.some((e: { version: number }) => e.version === 3));
  });

  it("a deploy past the bound with nothing to remove is refused and stores nothing", async () => {
    for (let n = 1; n <= LIMIT; n++) await deployOk("full", n, false);
    const refused = await deploy("full", 101, false);
    assert.deepEqual([refused.body.status, refused.body.code], [false, 28010005], refused.text);
    assert.match(refused.body.message, /full holds 100 revisions.*LIMIT_REVISIONS_PER_FLOW/);
    const releasing = await deploy("full", 101, true);
    assert.equal(releasing.body.code, 28010005, releasing.text);
    assert.deepEqual(await versions("full"), range(1, 100));
    const zh = await server.call("POST", `${DF}/flow/deploy`, {
      headers: { ...h, language: "zh-cn" },
      body: { ...at("full"), revisionName: "zh", flow: flowV(0), configure: {} },
    });
    assert.equal(zh.body.code, 28010005);
    assert.doesNotMatch(zh.body.message, /holds/);

    // The way out: release one; the next releasing deploy then retires it.
    await activate("full", 1);
    await deployOk("full", 101);
    assert.deepEqual(await versions("full"), range(2, 101));
  });

  it("a run whose revision was removed: monitoring still answers, re-run and resume are refused naming the version", async () => {
    await deployOk("gone", 1);
    await activate("gone");
    const ran = await df("/run-sync", { ...at("gone"), parameter: {} });
    assert.deepEqual(ran.body.data, { v: 1 });
    const runId = ran.headers.get("x-run-id") ?? "";
    for (let n = 2; n <= LIMIT + 1; n++) await deployOk("gone", n);
    assert.equal((await versions("gone")).includes(1), false);

    const mon = await server.call("GET", `${DF}/monitor/run?runId=${runId}`, { headers: h });
    assert.deepEqual([mon.body.code, mon.body.data.version], [0, "1"], mon.text);
    const det = await server.call("GET", `${DF}/monitor/run-detail?runId=${runId}`, {
      headers: h,
    });
    assert.equal(det.body.code, 0, det.text);
    assert.equal(det.body.data.graph, undefined);
    assert.equal(det.body.data.resumable, false);

    for (const [kind, code] of [
      ["rerun", 28020007],
      ["resume", 28020008],
    ] as const) {
      const r = await server.call("POST", `${DF}/run/${runId}/${kind}`, { headers: h, body: {} });
      assert.equal(r.body.code, code, r.text);
      assert.match(r.body.message, /revision \(version 1\) of gone was removed/);
      assert.match(r.body.message, /LIMIT_REVISIONS_PER_FLOW/);
    }
  });

  it("an import that would leave a flow holding more than the bound is a conflict", async () => {
    const revisions = Array.from({ length: LIMIT + 1 }, (_, i) => ({
      version: i + 1,
      name: `r${i + 1}`,
      flow: flowV(i + 1),
      configure: {},
      createdAt: 1,
    }));
    const bundle = {
      format: "sluice-export",
      formatVersion: 1,
      exportedAt: new Date(0).toISOString(),
      source: { app: "x", space: "y" },
      allRevisions: true,
      flows: [
        { path: "/keep", name: "imported", status: "APPROVED", releaseVersion: 101, revisions },
      ],
      scripts: [],
    };
    const dry = await df("/import", { bundle, dryRun: true });
    assert.equal(dry.body.code, 0, dry.text.slice(0, 300));
    assert.match(
      dry.body.data.conflicts[0]?.reason ?? "",
      /101 revisions.*LIMIT_REVISIONS_PER_FLOW \(100\)/,
    );
    const r = await df("/import", { bundle });
    assert.equal(r.body.code, 28040001, r.text.slice(0, 300));
    const fits = await df("/import", {
      bundle: { ...bundle, flows: [{ ...bundle.flows[0], revisions: revisions.slice(1) }] },
    });
    assert.equal(fits.body.code, 0, fits.text.slice(0, 300));
  });
});
