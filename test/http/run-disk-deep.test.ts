import assert from "node:assert/strict";
import fs from "node:fs";
import path from "node:path";
import { after, before, describe, it } from "node:test";
import { DF, deployAndActivate } from "../helpers/flows.ts";
import { scopeHeaders, startServer, TEST_MODE, type TestServer } from "../helpers/server.ts";

/**
 * The disk watch's walk of a flow run's directory (docs/security.md, "Disk") went by path, so a
 * path past PATH_MAX (4,096 bytes: about 2,000 levels of one-letter directories) could not be
 * read, and everything below it was counted as nothing. A node that nested 3,000 directories and
 * wrote 128 MiB at the bottom, under a 64 MiB budget, succeeded and kept it all; with no end to
 * it, the data directory's filesystem (the database's) fills, and below the floor another
 * tenant's run is stopped as the largest. Now a tree deeper than the walk measures counts as past
 * every bound.
 */

const MiB = 1024 * 1024;
const BUDGET = 64 * MiB;

const DEEP = `import os
def main(p):
    for _ in range(p["depth"]):
        os.mkdir("d")
        os.chdir("d")
    for j in range(p["files"]):
        with open(f"big{j}", "wb") as f:
            for _ in range(16):
                f.write(b"x" * 1048576)
    return {"wrote": p["files"] * 16}
`;

const flow = {
  vertexes: [
    { id: "in", type: "input" },
    { id: "s", type: "script", config: { code: DEEP } },
  ],
  edges: [{ source: "in", target: "s" }],
};

const ATTACKER = scopeHeaders({ app: "evil", space: "s", user: "mallory" });

describe(`a run's files below a path the walk cannot read still count (${TEST_MODE})`, {
  skip: process.getuid?.() !== 0 && "per-task uids need root",
}, () => {
  let server: TestServer;
  before(async () => {
    server = await startServer({
      FILE_SWEEP_MS: "0",
      SCRIPT_RUN_DISK_BYTES: String(BUDGET),
      DATA_DIR_CHECK_MS: "50",
    });
    await deployAndActivate(
      server,
      "deep",
      flow,
      { fileCleanup: { type: "default" } },
      ATTACKER,
      "/f",
    );
  });
  after(() => server.close());

  const runSync = (parameter: unknown) =>
    server.call("POST", `${DF}/run-sync`, {
      headers: ATTACKER,
      body: { elementName: "deep", path: "/f", parameter },
    });

  it("128 MiB written 3,000 directories down, under a 64 MiB budget: the node is stopped and its files removed", async () => {
    const r = await runSync({ depth: 3000, files: 8 });
    assert.equal(r.body.status, false, r.text);
    assert.match(r.body.message, /nests deeper than the disk watch measures/, r.text);
    const runId = r.headers.get("x-run-id") ?? r.headers.get("x-task-id");
    const tasks = path.join(server.dataDir, "tasks");
    const left = fs.readdirSync(tasks).filter((n) => n === runId || !n.startsWith("u"));
    for (const dir of left) assert.deepEqual(fs.readdirSync(path.join(tasks, dir)), [], dir);
  });

  it("a shallow tree is measured as before: a node within its budget succeeds", async () => {
    const r = await runSync({ depth: 20, files: 1 });
    assert.equal(r.body.status, true, r.text);
  });
});
