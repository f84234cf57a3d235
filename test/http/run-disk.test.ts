import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { after, before, describe, it } from "node:test";
import { DF, deployAndActivate } from "../helpers/flows.ts";
import {
  modeEnv,
  scopeHeaders,
  startServer,
  TEST_MODE,
  type TestServer,
  upload,
} from "../helpers/server.ts";

/**
 * Attack (docs/security.md, "Disk"): a flow's script node writes files into its run's working
 * directory, on the data directory's filesystem (`DATA_DIR/tasks/<runId>`, kept after the run),
 * until the filesystem is full; the database (SQLite in DATA_DIR) and every other tenant's runs
 * then fail. Defence: Node watches the run's directory (SCRIPT_RUN_DISK_BYTES) and the
 * filesystem's free space (DATA_DIR_FREE_BYTES_MIN): the node fails, its run's files go, and
 * script nodes are refused while the filesystem is below its floor.
 */

const MiB = 1024 * 1024;
const SIZE = 64 * MiB;
const BUDGET = 12 * MiB;
const FLOOR = 12 * MiB;

const ATTACKER = { app: "evil", space: "s", user: "mallory" };
const VICTIM = { app: "good", space: "s", user: "alice" };

/** Writes 1 MiB files until the filesystem refuses one. */
const FILL = `import os
def main(p):
    n = 0
    try:
        while True:
            with open("f%d" % n, "wb") as f:
                f.write(b"x" * 1048576)
            n += 1
    except OSError as e:
        return {"files": n, "errno": e.errno}
`;

/** Passes the budget, then stays: only a kill from outside ends it. */
const FILL_AND_WAIT = `import time
def main(p):
    for n in range(20):
        with open("g%d" % n, "wb") as f:
            f.write(b"x" * 1048576)
    time.sleep(600)
    return "never"
`;

/** A small file, kept: what a normal flow's script node does. */
const SMALL = `def main(p):
    with open("report.csv", "w") as f:
        f.write("id,total\\n1,42\\n" * 1000)
    return {"ok": True, "n": p["n"]}
`;

const flowOf = (code: string) => ({
  vertexes: [
    { id: "in", type: "input" },
    { id: "s", type: "script", config: { code } },
  ],
  edges: [{ source: "in", target: "s" }],
});

const NO_SCRIPT = {
  vertexes: [
    { id: "in", type: "input" },
    { id: "out", type: "output" },
  ],
  edges: [{ source: "in", target: "out" }],
};

/** What a run's directory holds: removed before the node's failure is answered (then, or soon after, the directory too). */
const leftIn = (dir: string, runId: string): string[] => {
  try {
    return fs.readdirSync(path.join(dir, "tasks", runId));
  } catch {
    return [];
  }
};

const statfsFree = (dir: string) => {
  const s = fs.statfsSync(dir);
  return s.bavail * s.bsize;
};

describe(`a flow's script node cannot fill the data directory's filesystem (${TEST_MODE})`, {
  skip: process.getuid?.() !== 0 && "mounting a small filesystem for the data directory needs root",
}, () => {
  let server: TestServer;
  let mountPoint: string;

  const runSync = (scope: typeof VICTIM, elementName: string, parameter: unknown = {}) =>
    server.call("POST", `${DF}/run-sync`, {
      headers: scopeHeaders(scope),
      body: { elementName, path: "/f", parameter },
    });

  /** The victim's run-sync succeeds and its run is recorded SUCCESS. */
  async function victimRuns(n: number): Promise<void> {
    const r = await runSync(VICTIM, "small", { n, pad: "p".repeat(256 * 1024) });
    assert.equal(r.body.status, true, r.text);
    assert.deepEqual(r.body.data, { ok: true, n });
    const run = await server.services.store.getRun(null, r.headers.get("x-run-id") ?? "");
    assert.equal(run?.status, "SUCCESS");
  }

  before(async () => {
    mountPoint = fs.mkdtempSync(path.join(os.tmpdir(), "sluice-small-fs-"));
    execFileSync("mount", ["-t", "tmpfs", "-o", `size=${SIZE},mode=0755`, "tmpfs", mountPoint]);
    server = await startServer(
      {
        ...(await modeEnv()),
        FILE_SWEEP_MS: "0",
        SCRIPT_RUN_DISK_BYTES: String(BUDGET),
        DATA_DIR_FREE_BYTES_MIN: String(FLOOR),
        DATA_DIR_CHECK_MS: "20",
      },
      { dataDir: mountPoint, keepData: true },
    );
    const keep = { fileCleanup: { type: "default" } };
    const a = scopeHeaders(ATTACKER);
    await deployAndActivate(server, "fill", flowOf(FILL), keep, a, "/f");
    await deployAndActivate(server, "stay", flowOf(FILL_AND_WAIT), keep, a, "/f");
    const v = scopeHeaders(VICTIM);
    await deployAndActivate(
      server,
      "small",
      flowOf(SMALL),
      { fileCleanup: { type: "keep" } },
      v,
      "/f",
    );
    await deployAndActivate(server, "plain", NO_SCRIPT, {}, v, "/f");
  });
  after(async () => {
    await server?.close();
    execFileSync("umount", [mountPoint]);
    fs.rmdirSync(mountPoint);
  });

  it("a node writing until the filesystem refuses fails, its files go, another tenant's runs go on", async () => {
    await victimRuns(1);
    const r = await runSync(ATTACKER, "fill");
    await victimRuns(2);
    assert.equal(r.body.status, false, r.text);
    assert.match(r.body.message, /SCRIPT_RUN_DISK_BYTES|DATA_DIR_FREE_BYTES_MIN/, r.text);
    const runId = r.headers.get("x-run-id") ?? "";
    const run = await server.services.store.getRun(null, runId);
    assert.equal(run?.status, "FAILURE");
    assert.deepEqual(leftIn(mountPoint, runId), []);
    assert.ok(statfsFree(mountPoint) > SIZE / 2, "the attacker's files were removed");
  });

  it("a node past the run's budget that keeps running is killed from outside", async () => {
    const r = await runSync(ATTACKER, "stay");
    assert.equal(r.body.status, false, r.text);
    assert.match(r.body.message, /SCRIPT_RUN_DISK_BYTES/, r.text);
    const runId = r.headers.get("x-run-id") ?? "";
    assert.deepEqual(leftIn(mountPoint, runId), []);
    await victimRuns(3);
  });

  it("below the free-space floor, script nodes are refused; other runs go on; /health says so", async () => {
    const filler = path.join(mountPoint, "filler");
    fs.writeFileSync(filler, Buffer.alloc(Math.max(0, statfsFree(mountPoint) - FLOOR + 2 * MiB)));
    try {
      const refused = await runSync(VICTIM, "small", { n: 4 });
      assert.equal(refused.body.status, false, refused.text);
      assert.match(refused.body.message, /DATA_DIR_FREE_BYTES_MIN/, refused.text);
      const plain = await runSync(VICTIM, "plain", { x: 1 });
      assert.equal(plain.body.status, true, plain.text);
      const health = await server.call("GET", "/health");
      assert.equal(health.body.disk?.low, true, health.text);
      // An environment would be written next to the database too: not built now.
      const withDeps =
        '# /// script\n# dependencies = ["sluice-slow"]\n# ///\ndef main(p):\n    return 1\n';
      const up = await upload(
        server,
        [{ name: "needs.py", content: withDeps }],
        { path: "/d" },
        scopeHeaders(VICTIM),
      );
      assert.equal(up.body.data[0]?.status, 2, up.text);
      assert.match(up.body.data[0]?.message, /DATA_DIR_FREE_BYTES_MIN/, up.text);
    } finally {
      fs.rmSync(filler);
    }
    await victimRuns(5);
    const health = await server.call("GET", "/health");
    assert.equal(health.body.disk?.low, false, health.text);
  });
});
