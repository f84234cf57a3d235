import assert from "node:assert/strict";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { after, before, describe, it } from "node:test";
import { artifactsSaved, WRITERS } from "../helpers/artifacts.ts";
import { DF, deployAndActivate } from "../helpers/flows.ts";
import { sluice } from "../helpers/process.ts";
import { SCOPE, scopeHeaders, startServer, type TestServer } from "../helpers/server.ts";
import { within } from "../helpers/wait.ts";

/** `sluice artifacts` (docs/cli.md, docs/artifacts.md) as a script would run it. */
describe("sluice artifacts", () => {
  let server: TestServer;
  let env: Record<string, string>;
  let runId: string;
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "sluice-cli-artifacts-"));

  before(async () => {
    server = await startServer({ FILE_SWEEP_MS: "0" });
    env = {
      SLUICE_URL: server.url,
      SLUICE_APP: SCOPE.app,
      SLUICE_SPACE: SCOPE.space,
      SLUICE_USER: SCOPE.user,
    };
    const saved = artifactsSaved(server.services);
    await deployAndActivate(server, "keeper", WRITERS, { fileCleanup: { type: "keep" } });
    const r = await server.call("POST", `${DF}/run-sync`, {
      headers: scopeHeaders(),
      body: { elementName: "keeper" },
    });
    runId = r.headers.get("x-run-id") ?? "";
    await within(saved(runId), 30_000, "the run's files are kept");
  });
  after(async () => {
    await server.close();
    fs.rmSync(dir, { recursive: true, force: true });
  });

  it("lists a run's files, as a table and as JSON", async () => {
    const t = await sluice(["artifacts", runId], env);
    assert.equal(t.code, 0, t.stderr);
    for (const n of ["report.csv", "sub/data.json", "b.txt"]) assert.ok(t.stdout.includes(n), n);
    assert.match(t.stdout, /skipped shadow: symbolic link/);
    const j = await sluice(["artifacts", runId, "--json", "--node", "b"], env);
    assert.deepEqual(
      JSON.parse(j.stdout).files.map((f: { name: string }) => f.name),
      ["b.txt", "page.html"],
    );
  });

  it("--get writes the bytes to stdout, or to --out", async () => {
    const s = await sluice(["artifacts", runId, "--get", "report.csv"], env);
    assert.equal(s.code, 0, s.stderr);
    assert.equal(s.stdout, "id,total\n1,42\n");
    const out = path.join(dir, "data.json");
    const f = await sluice(["artifacts", runId, "--get", "sub/data.json", "--out", out], env);
    assert.equal(f.code, 0, f.stderr);
    assert.equal(fs.readFileSync(out, "utf8"), '{"ok": true}');
  });

  it("exit codes: an unknown file or run 5, a traversing name 2, another scope 5", async () => {
    assert.equal((await sluice(["artifacts", runId, "--get", "nope.txt"], env)).code, 5);
    assert.equal((await sluice(["artifacts", "no-such-run"], env)).code, 5);
    const bad = await sluice(["artifacts", runId, "--get", "../../etc/passwd"], env);
    assert.equal(bad.code, 2, bad.stderr);
    assert.match(bad.stderr, /params\.name/);
    const other = await sluice(["artifacts", runId, "--get", "b.txt", "--space", "space2"], env);
    assert.equal(other.code, 5, other.stderr);
    assert.equal(other.stdout, "");
  });
});
