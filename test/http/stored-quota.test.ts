import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { sql } from "kysely";
import { BUNDLE_FORMAT } from "../../src/bundles/format.ts";
import { DF, deployAndActivate } from "../helpers/flows.ts";
import { scopeHeaders, startServer, type TestServer, upload } from "../helpers/server.ts";

/**
 * What an app may store (docs/security.md): a tenant stored runs of large parameters (each kept
 * with its result until retention or a delete) with no bound but the disk. Now past
 * LIMIT_STORED_BYTES_PER_APP (2 MiB here) its new runs (run-sync, run), deploys, uploads and
 * imports are refused with 28010008 naming the setting and nothing is written, while its
 * monitoring, deletes and deactivations still answer; another app is not affected; once a delete
 * freed space it runs again. In both modes.
 */

const LIMIT = 2 * 1024 * 1024;
const PARAM = { pad: "p".repeat(64 * 1024) };
const FLOW = {
  vertexes: [
    { id: "in", type: "input" },
    { id: "out", type: "output" },
  ],
  edges: [{ source: "in", target: "out" }],
};

describe("what an app may store (LIMIT_STORED_BYTES_PER_APP)", () => {
  let server: TestServer;
  const big = scopeHeaders({ app: "big", space: "s1", user: "u" });
  const big2 = scopeHeaders({ app: "big", space: "s2", user: "u" });
  const small = scopeHeaders({ app: "small", space: "s1", user: "u" });
  const sly = scopeHeaders({ app: "sly", space: "s1", user: "u" });
  const call = (h: Record<string, string>, p: string, body: unknown) =>
    server.call("POST", DF + p, { headers: h, body });
  const runs = async (app: string) => {
    const r = await sql<{ n: number | string }>`select count(*) as n from runs
      where app = ${app}`.execute(server.services.store.db);
    return Number(r.rows[0]?.n);
  };
  const refused = (r: { body: { code: number; message: string } }, what: string) => {
    assert.equal(r.body.code, 28010008, `${what}: ${JSON.stringify(r.body).slice(0, 300)}`);
    assert.match(r.body.message, /LIMIT_STORED_BYTES_PER_APP/);
  };

  before(async () => {
    server = await startServer({ LIMIT_STORED_BYTES_PER_APP: String(LIMIT) });
    await deployAndActivate(server, "echo", FLOW, {}, big);
    await deployAndActivate(server, "echo", FLOW, {}, big2);
    await deployAndActivate(server, "echo", FLOW, {}, small);
    // A flow whose runs store far more than their parameter: a run name template that repeats
    // the parameter 256 times, and 20 webhook targets of 8 KiB URLs each run copies.
    const hooks = Array.from({ length: 20 }, (_, i) => ({
      url: `http://hooks.example/${i}/${"u".repeat(8 * 1024)}`,
      on: ["CANCELED"],
    }));
    await deployAndActivate(
      server,
      "named",
      FLOW,
      { runNameTemplate: "${param.a}".repeat(256), webhooks: hooks },
      sly,
    );
  });
  after(() => server.close());

  it("refuses an app's new runs, deploys and uploads past its bytes, nothing written; other apps run; a delete makes room", async () => {
    const ids: string[] = [];
    let last: Awaited<ReturnType<typeof call>> | undefined;
    // Each run keeps its parameter, its result and its node logs (the same 64 KiB, about five
    // times): 2 MiB take a few of them.
    for (let i = 0; i < 40; i++) {
      last = await call(i % 2 ? big : big2, "/run-sync", { elementName: "echo", parameter: PARAM });
      if (last.body.code !== 0) break;
      ids.push(String(last.headers.get("x-run-id")));
    }
    assert.ok(last && ids.length >= 3 && ids.length <= 12, `${ids.length} runs before the refusal`);
    refused(last, "run-sync past the bound");
    const stored = await runs("big");
    assert.equal(stored, ids.length, "the refused run-sync stored nothing");
    const stats = await server.services.store.storedBytes("big");
    // Passed by at most the run that crossed it (docs/security.md, "What an app may store").
    assert.ok(stats >= LIMIT && stats < LIMIT + 512 * 1024, `${ids.length} runs, ${stats} bytes`);

    // Every way in that stores is refused, in either space of the app; nothing written.
    refused(await call(big, "/run", { elementName: "echo", parameter: { a: 1 } }), "run");
    refused(
      await call(big2, "/run-sync", { elementName: "echo", parameter: {} }),
      "small run-sync",
    );
    const dep = await call(big, "/flow/deploy", {
      elementName: "echo",
      path: "/flows",
      revisionName: "r2",
      flow: FLOW,
      configure: {},
    });
    refused(dep, "deploy");
    const up = await upload(
      server,
      [{ name: "s.py", content: "def main(p):\n  return p\n" }],
      {
        path: "/py",
      },
      big,
    );
    refused(up, "upload");
    const dry = await call(big, "/import", {
      dryRun: true,
      bundle: {
        format: BUNDLE_FORMAT,
        formatVersion: 1,
        exportedAt: new Date().toISOString(),
        source: { app: "big", space: "s" },
        allRevisions: false,
        flows: [],
        scripts: [],
      },
    });
    refused(dry, "an import's dry run, as the import would be");
    assert.equal(await runs("big"), stored);
    const els = await sql<{ n: number | string }>`select count(*) as n from elements e
      join flow_revisions r on r.element_id = e.id where e.app = 'big'`.execute(
      server.services.store.db,
    );
    assert.equal(Number(els.rows[0]?.n), 2, "no revision or script stored");

    // What reads, frees or stops is still answered.
    const mon = await server.call("GET", `${DF}/monitor/flows`, { headers: big });
    assert.equal(mon.body.code, 0, mon.text);

    // Another app is not affected.
    const other = await call(small, "/run-sync", { elementName: "echo", parameter: PARAM });
    assert.equal(other.body.code, 0, other.text.slice(0, 300));

    // A delete frees space: the app runs again at once.
    const del = await call(big, "/run/delete", { runIds: ids });
    assert.equal(del.body.code, 0, del.text);
    const again = await call(big, "/run-sync", { elementName: "echo", parameter: PARAM });
    assert.equal(again.body.code, 0, again.text.slice(0, 300));
  });

  it("counts what a run stores besides its parameter: its name and its webhook targets", async () => {
    // Each run: a 1 KiB parameter, a 256 KiB name rendered from it, 160 KiB of webhook targets.
    let last: Awaited<ReturnType<typeof call>> | undefined;
    let ran = 0;
    for (; ran < 30; ran++) {
      last = await call(sly, "/run-sync", {
        elementName: "named",
        parameter: { a: "a".repeat(1024) },
      });
      if (last.body.code !== 0) break;
    }
    assert.ok(last && last.body.code !== 0, `${ran} runs, none refused`);
    refused(last, "run-sync past the bound");
    // What the rows hold: at most the bound and the run that crossed it.
    const r = await sql<{ n: number | string }>`select sum(
        octet_length(coalesce(run_name, '')) + octet_length(coalesce(webhooks, ''))) as n
      from runs where app = 'sly'`.execute(server.services.store.db);
    const held = Number(r.rows[0]?.n);
    assert.ok(held < LIMIT + 512 * 1024, `${ran} runs hold ${held} bytes of names and targets`);
  });

  it("a rename, never refused by the bound, cannot store a revision name of megabytes", async () => {
    const r = await call(small, "/flow/deploy", {
      elementName: "echo",
      path: "/flows",
      revisionName: "n".repeat(1025),
    });
    assert.equal(r.body.code, 400, r.text.slice(0, 300));
    assert.match(r.body.message, /revisionName/);
    const ok = await call(small, "/flow/deploy", {
      elementName: "echo",
      path: "/flows",
      revisionName: "n".repeat(1024),
    });
    assert.equal(ok.body.code, 0, ok.text.slice(0, 300));
  });
});
