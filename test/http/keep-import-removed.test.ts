import assert from "node:assert/strict";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { after, describe, it } from "node:test";
import { DF } from "../helpers/flows.ts";
import { modeEnv, scopeHeaders, startServer } from "../helpers/server.ts";

/**
 * Version numbers are never reused (docs/dataflow-service.md, "How many revisions are kept"),
 * imports included (docs/export-import.md): a revision that LIMIT_REVISIONS_PER_FLOW removed
 * stays removed. An import that brought back its number with another graph made the old runs of
 * that number look as if they had run it, and their re-run execute it. In both modes.
 */

/** input → calc (answers {v: n}) → output: a run's result tells which graph ran. */
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

describe("an import and the revisions the bound removed", () => {
  it("a removed revision's number is a conflict, not a revision added under it", async () => {
    const env = await modeEnv();
    const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), "sluice-keep-import-"));
    after(() => fs.rmSync(dataDir, { recursive: true, force: true }));
    const h = scopeHeaders();
    const at = { elementName: "reborn", path: "/keep" };

    // A service keeping 3 revisions: version 1 ran, then went.
    const first = await startServer(
      { ...env, LIMIT_REVISIONS_PER_FLOW: "3" },
      { dataDir, keepData: true },
    );
    let runId = "";
    try {
      const df = (p: string, body: unknown) => first.call("POST", DF + p, { headers: h, body });
      for (let n = 1; n <= 4; n++) {
        const d = await df("/flow/deploy", {
          ...at,
          revisionName: `r${n}`,
          flow: flowV(n),
          configure: {},
        });
        assert.equal(d.body.code, 0, d.text);
        if (n === 1) {
          await df("/flow/activate", at);
          const ran = await df("/run-sync", { ...at, parameter: {} });
          assert.deepEqual(ran.body.data, { v: 1 }, ran.text);
          runId = ran.headers.get("x-run-id") ?? "";
        }
      }
    } finally {
      await first.close();
    }

    // The same data with the bound raised, and a file whose version 1 is another graph.
    const second = await startServer({ ...env, LIMIT_REVISIONS_PER_FLOW: "10" }, { dataDir });
    after(() => second.close());
    const df = (p: string, body: unknown) => second.call("POST", DF + p, { headers: h, body });
    const versions = async () =>
      (await df("/flow/revisions", { ...at, pageNo: 0, pageSize: 100 })).body.data.items.map(
        (i: { version: number }) => i.version,
      );
    assert.deepEqual(await versions(), [4, 3, 2]);
    const bundle = {
      format: "sluice-export",
      formatVersion: 1,
      exportedAt: new Date(0).toISOString(),
      source: { app: "x", space: "y" },
      allRevisions: true,
      flows: [
        {
          path: "/keep",
          name: "reborn",
          status: "APPROVED",
          releaseVersion: 1,
          revisions: [{ version: 1, name: "other", flow: flowV(999), configure: {}, createdAt: 1 }],
        },
      ],
      scripts: [],
    };
    const dry = await df("/import", { bundle, dryRun: true });
    assert.equal(dry.body.code, 0, dry.text);
    assert.match(
      dry.body.data.conflicts[0]?.reason ?? "",
      /revision 1 .*removed.*LIMIT_REVISIONS_PER_FLOW/,
      dry.text,
    );
    const imported = await df("/import", { bundle });
    assert.equal(imported.body.code, 28040001, imported.text);
    assert.deepEqual(await versions(), [4, 3, 2]);

    // The run of the removed version 1 is still refused a re-run, not given graph 999.
    const rerun = await second.call("POST", `${DF}/run/${runId}/rerun`, { headers: h, body: {} });
    assert.equal(rerun.body.code, 28020007, rerun.text);
  });
});
