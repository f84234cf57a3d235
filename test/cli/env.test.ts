import assert from "node:assert/strict";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { after, before, describe, it } from "node:test";
import { sluice } from "../helpers/process.ts";
import { SCOPE, scopeHeaders, startServer, type TestServer, upload } from "../helpers/server.ts";
import { writeWheel } from "../helpers/wheels.ts";

const WITH_DEPS = `# /// script
# dependencies = ["sluice-helper>=2"]
# ///
import sluice_helper

def main(p=None):
    return sluice_helper.help()
`;

describe("sluice env: an element's environment", () => {
  let server: TestServer;
  let env: Record<string, string>;
  const wheels = fs.mkdtempSync(path.join(os.tmpdir(), "sluice-wheels-"));

  before(async () => {
    writeWheel(wheels, {
      name: "sluice-helper",
      version: "2.1",
      files: { "sluice_helper.py": "def help():\n    return 'helped'\n" },
    });
    server = await startServer({ PIP_NO_INDEX: "1", PIP_FIND_LINKS: wheels });
    env = {
      SLUICE_URL: server.url,
      SLUICE_APP: SCOPE.app,
      SLUICE_SPACE: SCOPE.space,
      SLUICE_USER: SCOPE.user,
    };
    const up = await upload(server, [{ name: "scored.py", content: WITH_DEPS }], { path: "/cli" });
    assert.equal(up.body.data[0].status, 0, up.text);
    const plain = "def main(p=None):\n    return 1\n";
    const v2 = await upload(server, [{ name: "scored.py", content: plain }], {
      path: "/cli",
      overwrite: "true",
    });
    assert.equal(v2.body.data[0].status, 0, v2.text);
  });
  after(async () => {
    await server.close();
    fs.rmSync(wheels, { recursive: true, force: true });
  });

  it("prints a version's hash and name==version lines, or JSON", async () => {
    const text = await sluice(["env", "scored", "--path", "/cli", "--version", "1"], env);
    assert.equal(text.code, 0, text.stderr);
    const lines = text.stdout.trim().split("\n");
    assert.match(lines[0] ?? "", /^\/cli\/scored v1: environment [0-9a-f]{32}$/);
    assert.equal(lines[1], "declared: sluice-helper");
    assert.deepEqual(lines.slice(2), ["sluice-helper==2.1"]);

    const json = await sluice(["env", "scored", "--version", "1", "--json"], env);
    assert.equal(json.code, 0, json.stderr);
    const out = JSON.parse(json.stdout);
    assert.deepEqual([out.elementName, out.path, out.version], ["scored", "/cli", 1]);
    assert.equal(out.env.hash, lines[0]?.split(" ").at(-1));
    assert.deepEqual(out.env.packages, ["sluice-helper==2.1"]);
  });

  it("says so when the version declares nothing; usage and not-found exit codes", async () => {
    const newest = await sluice(["env", "scored"], env);
    assert.equal(newest.code, 0, newest.stderr);
    assert.equal(newest.stdout.trim(), "/cli/scored v2: no dependencies declared, no environment");
    const json = await sluice(["env", "scored", "--json"], env);
    assert.equal(JSON.parse(json.stdout).env, null);
    assert.equal((await sluice(["env", "scored", "--version", "0"], env)).code, 2);
    assert.equal((await sluice(["env"], env)).code, 2);
    assert.equal((await sluice(["env", "nope"], env)).code, 5);
  });

  it("logs of a task names its environment", async () => {
    const r = await server.call("POST", "/script/script/run-sync", {
      headers: scopeHeaders(),
      body: { elementName: "scored", version: 1 },
    });
    const taskId = r.headers.get("x-task-id") ?? "";
    assert.ok(taskId, r.text);
    const logs = await sluice(["logs", taskId], env);
    assert.equal(logs.code, 0, logs.stderr);
    assert.match(logs.stdout, /environment [0-9a-f]{32}: sluice-helper==2\.1/);
  });
});
