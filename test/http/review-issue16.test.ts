import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { DF, deployAndActivate, NO_SCRIPT_FLOW } from "../helpers/flows.ts";
import {
  OTHER_SCOPE,
  type Reply,
  scopeHeaders,
  startServer,
  type TestServer,
  upload,
} from "../helpers/server.ts";

/**
 * Review of issue 16 (revisions, rollback, script versions, re-run/resume, export/import) as an
 * attacker: each request here must answer a documented envelope, never an internal error, and
 * never reach another app/space.
 */

const h = scopeHeaders();
const other = scopeHeaders(OTHER_SCOPE);
const INTERNAL = 999999;

function bundleOf(flows: unknown[], scripts: unknown[] = []) {
  return {
    format: "sluice-export",
    formatVersion: 1,
    exportedAt: new Date(0).toISOString(),
    source: { app: "x", space: "y" },
    allRevisions: true,
    flows,
    scripts,
  };
}
const flowEntry = (name: string, flow: unknown, version = 1, status = "APPROVED") => ({
  path: "/imp",
  name,
  status,
  releaseVersion: version,
  revisions: [{ version, name: "r", flow, configure: {}, createdAt: 1 }],
});

/** No internal error: a documented code (success or a refusal). */
function noInternal(r: Reply, what: string): void {
  assert.equal(r.status, 200, `${what}: ${r.text}`);
  assert.notEqual(r.body?.code, INTERNAL, `${what}: ${r.text}`);
}

describe("review issue 16", () => {
  let s: TestServer;
  const on = (p: string, body: unknown, headers: Record<string, string> = h) =>
    s.call("POST", DF + p, { headers, body });
  before(async () => {
    s = await startServer();
    await deployAndActivate(s, "mine", NO_SCRIPT_FLOW, {}, h, "/flows");
    await upload(s, [{ name: "sec.py", content: "def main(p):\n    return 'space1'\n" }], {
      path: "/lib",
    });
  });
  after(async () => {
    await s.close();
  });

  describe("import writes graphs no deploy would accept", () => {
    it("a vertex that is null: the import refuses it, or activate answers without an internal error", async () => {
      const imp = await on("/import", {
        bundle: bundleOf([flowEntry("nullv", { vertexes: [null], edges: [] }, 1, "DRAFT")]),
      });
      noInternal(imp, "import");
      assert.equal(imp.body.code, 28040001, imp.text);
      assert.match(imp.text, /does not validate as a deploy/);
      noInternal(await on("/flow/activate", { elementName: "nullv", path: "/imp" }), "activate");
    });

    it("vertexes that are an object: /run-sync and /flow/activate answer without an internal error", async () => {
      const imp = await on("/import", {
        bundle: bundleOf([flowEntry("objv", { vertexes: {}, edges: {} })]),
      });
      noInternal(imp, "import");
      noInternal(await on("/run-sync", { elementName: "objv", parameter: {} }), "run-sync");
      noInternal(await on("/flow/activate", { elementName: "objv", path: "/imp" }), "activate");
    });

    it("a transform whose operators are not a list: /run-sync answers without an internal error", async () => {
      const flow = {
        vertexes: [
          { id: "in", type: "input" },
          { id: "t", type: "transform", config: { operators: "x" } },
          { id: "out", type: "output" },
        ],
        edges: [
          { source: "in", target: "t" },
          { source: "t", target: "out" },
        ],
      };
      noInternal(await on("/import", { bundle: bundleOf([flowEntry("badop", flow)]) }), "import");
      noInternal(await on("/run-sync", { elementName: "badop", parameter: {} }), "run-sync");
    });
  });

  describe("versions beyond what the store can hold", () => {
    it("an imported revision 2^53: the import and a later deploy answer without an internal error", async () => {
      const imp = await on("/import", {
        bundle: bundleOf([flowEntry("big", NO_SCRIPT_FLOW, 2 ** 53)]),
      });
      noInternal(imp, "import");
      assert.equal(imp.body.code, 400, imp.text);
      noInternal(
        await on("/flow/deploy", {
          elementName: "big",
          path: "/imp",
          revisionName: "r2",
          flow: NO_SCRIPT_FLOW,
          configure: {},
        }),
        "deploy",
      );
      noInternal(
        await on("/flow/revisions", { elementName: "big", path: "/imp", pageNo: 0, pageSize: 5 }),
        "revisions",
      );
    });

    it("an imported revision 1e20: a later deploy answers without an internal error", async () => {
      noInternal(
        await on("/import", { bundle: bundleOf([flowEntry("e20", NO_SCRIPT_FLOW, 1e20)]) }),
        "import",
      );
      noInternal(
        await on("/flow/deploy", {
          elementName: "e20",
          path: "/imp",
          revisionName: "r2",
          flow: NO_SCRIPT_FLOW,
          configure: {},
        }),
        "deploy",
      );
    });

    for (const version of [2 ** 31, 2 ** 53, 1e300]) {
      it(`revision, revision-diff, activate and script version ${version}: not found or a 400, never an internal error`, async () => {
        const loc = { elementName: "mine", path: "/flows" };
        noInternal(await on("/flow/revision", { ...loc, version }), "revision");
        noInternal(
          await on("/flow/revision-diff", { ...loc, fromVersion: 1, toVersion: version }),
          "revision-diff",
        );
        noInternal(await on("/flow/activate", { ...loc, version }), "activate");
        const sv = await s.call("POST", `${s.config.scriptPrefix}/element/version`, {
          headers: h,
          body: { elementName: "sec", path: "/lib", version },
        });
        noInternal(sv, "script version");
      });
    }

    it("a page number whose offset no integer holds: a 400, not an internal error", async () => {
      const loc = { elementName: "mine", path: "/flows" };
      for (const p of ["/flow/revisions", "/flow/releases"])
        noInternal(await on(p, { ...loc, pageNo: 1e300, pageSize: 10 }), p);
      const sv = await s.call("POST", `${s.config.scriptPrefix}/element/versions`, {
        headers: h,
        body: { elementName: "sec", path: "/lib", pageNo: 1e300, pageSize: 10 },
      });
      noInternal(sv, "script versions");
    });
  });

  it("an import whose flow is deeply nested JSON (within the body limit): no internal error", async () => {
    const deep = `${"[".repeat(100000)}${"]".repeat(100000)}`;
    const raw = JSON.stringify({
      bundle: bundleOf([flowEntry("deep", { vertexes: [], edges: [], x: "@@" })]),
    }).replace('"@@"', deep);
    const r = await s.call("POST", `${DF}/import`, {
      headers: { ...h, "content-type": "application/json" },
      raw,
    });
    noInternal(r, "import");
    assert.equal(r.body.code, 400, r.text);
    assert.match(r.text, /nests deeper than/);
  });

  it("revision-diff of two revisions whose vertex holds a long list that changed everywhere: no internal error", async () => {
    const flow = (fill: number) => ({
      ...NO_SCRIPT_FLOW,
      vertexes: NO_SCRIPT_FLOW.vertexes.map((v) =>
        v.id === "out" ? { ...v, layout: new Array(300000).fill(fill) } : v,
      ),
    });
    for (const [i, fill] of [0, 1].entries()) {
      const d = await on("/flow/deploy", {
        elementName: "wide",
        path: "/flows",
        revisionName: `r${i + 1}`,
        flow: flow(fill),
        configure: {},
      });
      assert.equal(d.body.code, 0, d.text.slice(0, 300));
    }
    const r = await on("/flow/revision-diff", {
      elementName: "wide",
      path: "/flows",
      fromVersion: 1,
      toVersion: 2,
    });
    noInternal(r, "revision-diff");
  });

  it("two identical imports at once: one writes, the other answers a documented code", async () => {
    const bundle = bundleOf([flowEntry("twice", NO_SCRIPT_FLOW)]);
    const both = await Promise.all([on("/import", { bundle }), on("/import", { bundle })]);
    for (const r of both) noInternal(r, "import");
    // The later one plans again against what the first wrote: nothing left to do.
    for (const r of both) assert.equal(r.body.status, true, r.text);
  });

  describe("scope (checked sound; kept as regression guards)", () => {
    it("another space cannot export, read revisions of, or re-run this space's things by ID", async () => {
      const el = (await s.services.store.findElements(h, { type: "DPL", name: "mine" }))[0];
      assert.ok(el);
      const exp = await on("/export", { elements: [{ elementId: el.id }] }, other);
      assert.equal(exp.body.code, 28010001, exp.text);
      const rev = await on("/flow/revision", { elementId: el.id, version: 1 }, other);
      assert.equal(rev.body.code, 28010001, rev.text);
      const run = await on("/run-sync", {
        elementName: "mine",
        path: "/flows",
        parameter: { orders: [] },
      });
      const runId = run.headers.get("x-run-id") ?? "";
      assert.ok(runId, run.text);
      const re = await s.call("POST", `${DF}/run/${runId}/rerun`, { headers: other, body: {} });
      assert.equal(re.body.code, 28020002, re.text);
      const folder = await s.services.store.folderByPath(h, "/flows");
      const byFolder = await on("/export", { folderId: folder?.id ?? "" }, other);
      assert.equal(byFolder.body.code, 28010003, byFolder.text);
    });

    it("an import in another space naming this space's script by elementId is refused, and writes nothing here", async () => {
      const sec = (await s.services.store.findElements(h, { type: "PY", name: "sec" }))[0];
      assert.ok(sec);
      const flow = {
        vertexes: [
          { id: "in", type: "input" },
          {
            id: "s",
            type: "script",
            config: { element: { elementName: "sec", elementId: sec.id } },
          },
          { id: "out", type: "output" },
        ],
        edges: [
          { source: "in", target: "s" },
          { source: "s", target: "out" },
        ],
      };
      const r = await on("/import", { bundle: bundleOf([flowEntry("steal", flow)]) }, other);
      assert.equal(r.body.code, 28040001, r.text);
      // Same path and name as this space's flow: the other space gets its own element.
      const same = await on(
        "/import",
        { bundle: { ...bundleOf([{ ...flowEntry("mine", NO_SCRIPT_FLOW), path: "/flows" }]) } },
        other,
      );
      assert.equal(same.body.code, 0, same.text);
      assert.deepEqual(same.body.data.created.length, 1, same.text);
      const mine = await on("/flow/revisions", {
        elementName: "mine",
        path: "/flows",
        pageNo: 0,
        pageSize: 10,
      });
      assert.equal(mine.body.data.totalCount, 1, mine.text);
    });
  });
});

describe("an export is bounded like the import that would read it", () => {
  let server: TestServer;
  before(async () => {
    server = await startServer({ LIMIT_BODY_BYTES: "65536" });
  });
  after(() => server.close());

  it("an export past LIMIT_BODY_BYTES is a 413 saying how to export less, not a huge answer", async () => {
    const big = `X = ${JSON.stringify("x".repeat(40_000))}\ndef main(p):\n    return p\n`;
    for (const name of ["big1", "big2"]) {
      const up = await upload(server, [{ name: `${name}.py`, content: big }], { path: "/big" });
      assert.equal(up.body.data[0].status, 0, up.text);
    }
    const flow = {
      vertexes: [
        { id: "in", type: "input" },
        { id: "a", type: "script", config: { element: { elementName: "big1", path: "/big" } } },
        { id: "b", type: "script", config: { element: { elementName: "big2", path: "/big" } } },
      ],
      edges: [
        { source: "in", target: "a" },
        { source: "a", target: "b" },
      ],
    };
    await deployAndActivate(server, "bigflow", flow, {}, h, "/big");
    const r = await server.call("POST", `${DF}/export`, { headers: h, body: { path: "/big" } });
    assert.equal(r.body.code, 413, r.text.slice(0, 300));
    assert.match(r.body.message, /export would be over 65536 bytes/);
    assert.ok(r.text.length < 1000, "the refusal is short");
  });
});

describe("an import's script content is strict base64", () => {
  let server: TestServer;
  before(async () => {
    server = await startServer();
  });
  after(() => server.close());

  it("content that is not base64 is a 400 naming the field, and nothing is written", async () => {
    const bundle = bundleOf(
      [],
      [{ path: "/imp", name: "s", kind: "module", content: "!!not base64!!", sha256: "0" }],
    );
    const r = await server.call("POST", `${DF}/import`, { headers: h, body: { bundle } });
    assert.equal(r.body.code, 400, r.text);
    assert.match(r.body.message, /body\.bundle\.scripts\.0\.content/);
    const list = await server.call("POST", "/script/script/element/versions", {
      headers: h,
      body: { elementName: "s", path: "/imp", pageNo: 0, pageSize: 10 },
    });
    assert.notEqual(list.body.status, true, "no script was created");
  });
});

describe("an export pages through a flow's revisions", () => {
  let server: TestServer;
  before(async () => {
    server = await startServer();
  });
  after(() => server.close());

  it("a flow of 45 revisions exports every one, oldest first", async () => {
    for (let i = 1; i <= 45; i++) {
      const d = await server.call("POST", `${DF}/flow/deploy`, {
        headers: h,
        body: {
          elementName: "many",
          revisionName: `r${i}`,
          path: "/p",
          flow: NO_SCRIPT_FLOW,
          configure: {},
        },
      });
      assert.equal(d.body.status, true, d.text);
    }
    const r = await server.call("POST", `${DF}/export`, { headers: h, body: { path: "/p" } });
    assert.equal(r.body.status, true, r.text.slice(0, 300));
    const versions = r.body.data.flows[0].revisions.map((v: { version: number }) => v.version);
    assert.deepEqual(
      versions,
      Array.from({ length: 45 }, (_, i) => i + 1),
    );
  });
});
