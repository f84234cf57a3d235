import assert from "node:assert/strict";
import { createHash } from "node:crypto";
import { after, before, describe, it } from "node:test";
import { DF } from "../helpers/flows.ts";
import { scopeHeaders, startServer, type TestServer, upload } from "../helpers/server.ts";

/**
 * An export carries, per script, the version the exported releases pin (else the newest) with its
 * number; an import records its release as an IMPORT event and gives created scripts version 1
 * (docs/export-import.md, "Script versions").
 */
const scoreV = (n: number) => `def main(p):\n    return {'score': ${n}}\n`;
const FLOW = {
  vertexes: [
    { id: "in", type: "input" },
    { id: "score", type: "script", config: { element: { elementName: "sv", path: "/xv" } } },
    { id: "out", type: "output" },
  ],
  edges: [
    { source: "in", target: "score" },
    { source: "score", target: "out" },
  ],
};

interface BundleScript {
  name: string;
  version?: number;
  content: string;
  sha256: string;
}

describe("export and import of script versions", () => {
  let source: TestServer;
  let target: TestServer;
  const h = scopeHeaders();
  const on = (s: TestServer, p: string, body: unknown) =>
    s.call("POST", DF + p, { headers: h, body });
  const put = async (name: string, n: number, overwrite = false) => {
    const r = await upload(source, [{ name: `${name}.py`, content: scoreV(n) }], {
      path: "/xv",
      ...(overwrite ? { overwrite: "true" } : {}),
    });
    assert.equal(r.body.data[0].status, 0, r.text);
  };
  const exported = async () => {
    const r = await on(source, "/export", { path: "/xv" });
    assert.equal(r.body.code, 0, r.text);
    const scripts = r.body.data.scripts as BundleScript[];
    const shown = scripts.map((s) => [
      s.name,
      s.version,
      Buffer.from(s.content, "base64").toString(),
      s.sha256 === createHash("sha256").update(Buffer.from(s.content, "base64")).digest("hex"),
    ]);
    return { bundle: r.body.data, shown };
  };

  before(async () => {
    source = await startServer();
    target = await startServer();
  });
  after(async () => {
    await source.close();
    await target.close();
  });

  it("exports the pinned version, not the newest; the target runs it and records the IMPORT", async () => {
    await put("sv", 1);
    await put("loose", 1);
    await put("loose", 2, true);
    const d = await on(source, "/flow/deploy", {
      elementName: "fx",
      revisionName: "r1",
      path: "/xv",
      flow: FLOW,
      configure: {},
    });
    assert.equal(d.body.status, true, d.text);
    assert.equal(
      (await on(source, "/flow/activate", { elementName: "fx", path: "/xv" })).body.data,
      "APPROVED",
    );
    await put("sv", 2, true); // the release still pins version 1

    const first = await exported();
    // sv: the pinned version 1; loose (no flow pins it): its newest.
    assert.deepEqual(first.shown, [
      ["loose", 2, scoreV(2), true],
      ["sv", 1, scoreV(1), true],
    ]);

    const imp = await on(target, "/import", { bundle: first.bundle });
    assert.equal(imp.body.code, 0, imp.text);
    const run = await on(target, "/run-sync", { elementName: "fx", path: "/xv", parameter: {} });
    assert.deepEqual(run.body.data, { score: 1 }, run.text);
    const versions = await target.call(
      "POST",
      `${target.config.scriptPrefix}/script/element/versions`,
      {
        headers: h,
        body: { elementName: "sv", path: "/xv", pageNo: 0, pageSize: 10 },
      },
    );
    assert.deepEqual(
      versions.body.data.items.map((v: { version: number; uploadedBy: string | null }) => [
        v.version,
        v.uploadedBy,
      ]),
      [[1, h.user]],
    );
    const history = await on(target, "/flow/releases", {
      elementName: "fx",
      path: "/xv",
      pageNo: 0,
      pageSize: 10,
    });
    assert.deepEqual(
      history.body.data.items.map((e: { action: string; version: number; userId: string }) => [
        e.action,
        e.version,
        e.userId,
      ]),
      [["IMPORT", 1, h.user]],
    );
    const revs = await on(target, "/flow/revisions", {
      elementName: "fx",
      path: "/xv",
      pageNo: 0,
      pageSize: 10,
    });
    assert.deepEqual(
      revs.body.data.items.map((r: { version: number; stage: string; live: boolean }) => [
        r.version,
        r.stage,
        r.live,
      ]),
      [[1, "release", true]],
    );
  });

  it("after a re-pin the export carries the new version, which conflicts with the imported one", async () => {
    assert.equal(
      (await on(source, "/flow/activate", { elementName: "fx", path: "/xv" })).body.data,
      "APPROVED",
    );
    const again = await exported();
    assert.deepEqual(again.shown[1], ["sv", 2, scoreV(2), true]);
    const dry = await on(target, "/import", { bundle: again.bundle, dryRun: true });
    assert.deepEqual(
      dry.body.data.conflicts.map((c: { elementName: string }) => c.elementName),
      ["sv"],
    );
  });
});
