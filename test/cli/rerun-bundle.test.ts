import assert from "node:assert/strict";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { after, before, describe, it } from "node:test";
import { DF, deployAndActivate, NO_SCRIPT_FLOW } from "../helpers/flows.ts";
import { type Hook, startHook } from "../helpers/hook.ts";
import { sluice } from "../helpers/process.ts";
import { SCOPE, scopeHeaders, startServer, type TestServer } from "../helpers/server.ts";

const ORDERS = { orders: [{ amount: 2, qty: 3 }] };

/** The real `sluice` binary as a separate process (as test/cli/cli.test.ts runs it). */
describe("sluice rerun, resume, export and import against real servers", () => {
  let source: TestServer;
  let target: TestServer;
  let hook: Hook;
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "sluice-cli-bundle-"));
  const envOf = (s: TestServer) => ({
    SLUICE_URL: s.url,
    SLUICE_APP: SCOPE.app,
    SLUICE_SPACE: SCOPE.space,
    SLUICE_USER: SCOPE.user,
  });
  const h = scopeHeaders();

  before(async () => {
    source = await startServer();
    target = await startServer();
    hook = await startHook();
    await deployAndActivate(source, "orders", NO_SCRIPT_FLOW, {}, h, "/cli");
    await deployAndActivate(
      source,
      "chain",
      {
        vertexes: [
          { id: "in", type: "input" },
          { id: "count", type: "http", config: { url: `${hook.url}/count` } },
          { id: "flaky", type: "http", config: { url: `${hook.url}/flaky` } },
        ],
        edges: [
          { source: "in", target: "count" },
          { source: "count", target: "flaky" },
        ],
      },
      {},
      h,
      "/cli",
    );
  });
  after(async () => {
    await source.close();
    await target.close();
    await hook.close();
    fs.rmSync(dir, { recursive: true, force: true });
  });

  it("rerun prints the new run's ID, or with --sync its result; exit codes as documented", async () => {
    const env = envOf(source);
    const first = await source.call("POST", `${DF}/run-sync`, {
      headers: h,
      body: { elementName: "orders", parameter: ORDERS },
    });
    const id = first.headers.get("x-run-id") ?? "";
    const sync = await sluice(["rerun", id, "--sync", "--json"], env);
    assert.equal(sync.code, 0, sync.stderr);
    const out = JSON.parse(sync.stdout);
    assert.deepEqual(out.result, first.body.data);
    const run = await source.services.store.getRun(null, out.id);
    assert.deepEqual(run?.rerunOf, { runId: id, kind: "rerun" });
    const started = await sluice(["rerun", id], env);
    assert.equal(started.code, 0, started.stderr);
    assert.match(started.stdout.trim(), /^\S+$/, "only the run ID on stdout");
    assert.equal((await sluice(["rerun", "no-such-run"], env)).code, 5);
    assert.equal((await sluice(["rerun"], env)).code, 2);
    const notFailed = await sluice(["resume", id, "--json"], env);
    assert.equal(notFailed.code, 1);
    assert.equal(JSON.parse(notFailed.stdout).error.code, 28020008);
  });

  it("resume --sync finishes a failed run without repeating the nodes that succeeded", async () => {
    const env = envOf(source);
    const failed = await source.call("POST", `${DF}/run-sync`, {
      headers: h,
      body: { elementName: "chain", parameter: {} },
    });
    assert.equal(failed.body.code, 28020004);
    hook.healFlaky();
    const r = await sluice(
      ["resume", failed.headers.get("x-run-id") ?? "", "--sync", "--json"],
      env,
    );
    assert.equal(r.code, 0, r.stdout + r.stderr);
    assert.deepEqual(JSON.parse(r.stdout).result, { path: "/flaky", n: 2 });
    assert.equal(hook.calls("/count"), 1);
    const logs = await sluice(["logs", JSON.parse(r.stdout).id], env);
    assert.match(logs.stdout, new RegExp(`resumes ${failed.headers.get("x-run-id")}`));
    assert.match(logs.stdout, /count \(http\) SUCCESS .*reused from /);
  });

  it("export writes a file; import --dry-run plans, import writes, a second import skips", async () => {
    const file = path.join(dir, "cli.json");
    const ex = await sluice(
      ["export", "--path", "/cli", "--all-revisions", "-o", file],
      envOf(source),
    );
    assert.equal(ex.code, 0, ex.stderr);
    assert.match(ex.stderr, /exported 2 flows \(2 revisions\) and 0 scripts to /);
    const bundle = JSON.parse(fs.readFileSync(file, "utf8"));
    assert.equal(bundle.format, "sluice-export");
    const byName = await sluice(["export", "orders", "--json"], envOf(source));
    assert.equal(JSON.parse(byName.stdout).flows[0].name, "orders");
    assert.equal((await sluice(["export"], envOf(source))).code, 2);

    const env = envOf(target);
    const dry = await sluice(["import", file, "--dry-run", "--json"], env);
    assert.equal(dry.code, 0, dry.stderr);
    assert.deepEqual(
      JSON.parse(dry.stdout).created.map((i: { elementName: string }) => i.elementName),
      ["chain", "orders"],
    );
    const done = await sluice(["import", file], env);
    assert.equal(done.code, 0, done.stderr);
    assert.match(done.stdout, /created .*DPL .*\/cli\/orders/);
    assert.match(done.stderr, /2 created, 0 updated, 0 skipped, 0 conflicts/);
    const again = await sluice(["import", file, "--json"], env);
    assert.equal(JSON.parse(again.stdout).skipped.length, 2);
    const ran = await target.call("POST", `${DF}/run-sync`, {
      headers: h,
      body: { elementName: "orders", parameter: ORDERS },
    });
    assert.deepEqual(ran.body.data, [{ amount: 2, qty: 3, total: 6 }]);
  });

  it("a conflicting file: the dry run and the import exit 1, nothing written", async () => {
    const bundle = JSON.parse(
      (await sluice(["export", "--path", "/cli", "--all-revisions"], envOf(source))).stdout,
    );
    bundle.flows[0].revisions[0].flow.vertexes[0].id = "changed";
    bundle.flows.push({ ...bundle.flows[1], name: "brand-new" });
    const file = path.join(dir, "conflict.json");
    fs.writeFileSync(file, JSON.stringify(bundle));
    const env = envOf(target);
    const dry = await sluice(["import", file, "--dry-run"], env);
    assert.equal(dry.code, 1);
    assert.match(dry.stdout, /conflicts .*revision 1 differs/);
    const r = await sluice(["import", file, "--json"], env);
    assert.equal(r.code, 1);
    assert.equal(JSON.parse(r.stdout).error.code, 28040001);
    assert.deepEqual(
      await target.services.store.findElements(h, { type: "DPL", name: "brand-new" }),
      [],
    );
    fs.writeFileSync(path.join(dir, "bad.json"), "{not json");
    assert.equal((await sluice(["import", path.join(dir, "bad.json")], env)).code, 2);
  });
});
