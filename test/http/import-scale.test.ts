import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { DF, NO_SCRIPT_FLOW } from "../helpers/flows.ts";
import { scopeHeaders, startServer, type TestServer } from "../helpers/server.ts";

/**
 * An import as an attacker writes it (docs/export-import.md): a file within `LIMIT_BODY_BYTES`
 * holding one flow with more revisions than one SQL statement takes parameters (SQLite 32,766,
 * PostgreSQL 65,535; seven per revision) is written whole, or refused with an envelope; never an
 * internal error.
 */

const h = scopeHeaders();
const REVISIONS = 10_000;

function bundleOf(revisions: number) {
  return {
    format: "sluice-export",
    formatVersion: 1,
    exportedAt: new Date(0).toISOString(),
    source: { app: "x", space: "y" },
    allRevisions: true,
    flows: [
      {
        path: "/many",
        name: "revisions",
        status: "APPROVED",
        releaseVersion: revisions,
        revisions: Array.from({ length: revisions }, (_, i) => ({
          version: i + 1,
          name: `r${i + 1}`,
          flow: NO_SCRIPT_FLOW,
          configure: {},
          createdAt: 1,
        })),
      },
    ],
    scripts: [],
  };
}

describe("an import of a flow with 10,000 revisions", () => {
  let s: TestServer;
  before(async () => {
    // No bound on kept revisions: by default an import past LIMIT_REVISIONS_PER_FLOW is a
    // conflict (test/http/keep-revisions.test.ts); this one is about statement parameters.
    s = await startServer({ LIMIT_REVISIONS_PER_FLOW: "0" });
  });
  after(() => s.close());

  it("writes every revision in one import, and a re-import skips it", async () => {
    const bundle = bundleOf(REVISIONS);
    const r = await s.call("POST", `${DF}/import`, { headers: h, body: { bundle } });
    assert.equal(r.body.code, 0, r.text.slice(0, 300));
    assert.equal(r.body.data.created[0]?.versions.length, REVISIONS);
    const again = await s.call("POST", `${DF}/import`, { headers: h, body: { bundle } });
    assert.equal(again.body.code, 0, again.text.slice(0, 300));
    assert.equal(again.body.data.skipped.length, 1);
    const run = await s.call("POST", `${DF}/run-sync`, {
      headers: h,
      body: { elementName: "revisions", path: "/many", parameter: { orders: [] } },
    });
    assert.equal(run.body.code, 0, run.text.slice(0, 300));
  });
});
