import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { sql } from "kysely";
import { DF } from "../helpers/flows.ts";
import { scopeHeaders, startServer, type TestServer, upload } from "../helpers/server.ts";

/**
 * The folders a write creates (docs/dataflow-service.md, "Folders"): each folder row keeps its
 * whole path, so a deploy or upload to a path of n new levels stored n rows of up to the path's
 * length, n²/2 characters in all. An attacker measured one refused deploy (its app at
 * LIMIT_ELEMENTS_PER_APP) to a 400-level path storing 402 folders of 160 KB, and a 64 KiB upload
 * path nothing but rejected files stores about 1 GiB. Now a path whose folder does not exist yet is
 * at most 32 levels and 1,024 characters (400 naming `path`, nothing created); a folder that
 * exists is found at any length. In both modes.
 */

const FLOW = {
  vertexes: [
    { id: "in", type: "input" },
    { id: "out", type: "output" },
  ],
  edges: [{ source: "in", target: "out" }],
};
const levels = (n: number, seg = "a") => `/${Array.from({ length: n }, () => seg).join("/")}`;

describe("folder paths a write creates are bounded", () => {
  let server: TestServer;
  const h = (app: string) => scopeHeaders({ app, space: "s1", user: "u" });
  const df = (hh: Record<string, string>, p: string, body: unknown) =>
    server.call("POST", DF + p, { headers: hh, body });
  const deploy = (hh: Record<string, string>, name: string, path: string) =>
    df(hh, "/flow/deploy", {
      elementName: name,
      path,
      revisionName: "r",
      flow: FLOW,
      configure: {},
    });
  const db = () => (server.services.store as unknown as { db: import("kysely").Kysely<never> }).db;
  const folders = async (app: string) => {
    const r = await sql<{ n: number | string }>`
      select count(*) as n from folders where app = ${app}`.execute(db());
    return Number(r.rows[0]?.n);
  };

  before(async () => {
    server = await startServer({ LIMIT_ELEMENTS_PER_APP: "2" });
  });
  after(() => server.close());

  it("a deploy to a path too deep or too long is 400 naming path and creates no folder", async () => {
    const a = h("deep");
    const deep = await deploy(a, "x", levels(33));
    assert.deepEqual([deep.body.status, deep.body.code], [false, 400], deep.text);
    assert.match(deep.body.message, /: path .*32 levels/);
    const long = await deploy(a, "x", `/${"a".repeat(1024)}`);
    assert.equal(long.body.code, 400, long.text);
    assert.match(long.body.message, /: path .*1024 characters/);
    assert.equal(await folders("deep"), 0);
    // At the bound: stored.
    assert.equal((await deploy(a, "x", levels(32))).body.code, 0);
    assert.equal((await deploy(a, "y", `/${"b".repeat(1023)}`)).body.code, 0);
    assert.equal(await folders("deep"), 1 + 32 + 1);
    // The app at LIMIT_ELEMENTS_PER_APP: a refused deploy stored at most 32 small folders before;
    // one of 400 levels stores none.
    const refused = await deploy(a, "z", levels(400, "c"));
    assert.equal(refused.body.code, 400, refused.text);
    assert.equal(await folders("deep"), 34);
  });

  it("an upload to a path too deep is 400 and creates no folder", async () => {
    const r = await upload(
      server,
      [{ name: "s.txt", content: "not a script" }],
      { path: levels(2000) },
      h("up"),
    );
    assert.equal(r.body.code, 400, r.text);
    assert.match(r.body.message, /: path must /);
    assert.equal(await folders("up"), 0);
  });

  it("an import creating a folder too deep is 400 and writes nothing", async () => {
    const src = h("exp");
    assert.equal((await deploy(src, "e", levels(32))).body.code, 0);
    const exported = await df(src, "/export", { path: "/" });
    assert.equal(exported.body.code, 0, exported.text);
    const bundle = exported.body.data;
    bundle.flows[0].path = levels(33);
    const r = await df(h("imp"), "/import", { bundle });
    assert.equal(r.body.code, 400, r.text);
    assert.match(r.body.message, /path .*32 levels/);
    assert.equal(await folders("imp"), 0);
  });

  it("a folder that exists is found at any depth: deploys into it go on", async () => {
    const a = h("old");
    // As a release without the bound created it.
    const path = levels(40);
    const now = Date.now();
    let current = "";
    for (const seg of ["", ...path.slice(1).split("/")]) {
      current = seg === "" ? "/" : `${current === "/" ? "" : current}/${seg}`;
      await sql`insert into folders (id, app, space, path, created_at)
        values (${`old-${current.length}`}, 'old', 's1', ${current}, ${now})`.execute(db());
    }
    const r = await deploy(a, "f", path);
    assert.equal(r.body.code, 0, r.text);
    assert.equal(await folders("old"), 41);
  });
});
