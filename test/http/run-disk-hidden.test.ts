import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { after, before, describe, it } from "node:test";
import { DF, deployAndActivate } from "../helpers/flows.ts";
import { release } from "../helpers/gate-file.ts";
import {
  modeEnv,
  scopeHeaders,
  startServer,
  TEST_MODE,
  type TestServer,
} from "../helpers/server.ts";
import { pollUntil } from "../helpers/wait.ts";

/**
 * Attacks on the disk watch (docs/security.md, "Disk") that its directory walk does not see:
 * space held by a file the node deleted but keeps open (or never named: O_TMPFILE), and inodes
 * (empty files cost no bytes). The watch must stop the attacker's node, not another tenant's, and
 * other tenants' runs must go on.
 */

const MiB = 1024 * 1024;
const SIZE = 64 * MiB;
const INODES = 4096;
const BUDGET = 12 * MiB;
const FLOOR = 12 * MiB;

const ATTACKER = { app: "evil", space: "s", user: "mallory" };
const VICTIM = { app: "good", space: "s", user: "alice" };

/** Writes into a file it unlinked at once, until the filesystem refuses, and keeps it open. */
const HIDDEN = `import os, time
def main(p):
    f = open("h", "wb")
    os.unlink("h")
    n = 0
    try:
        while True:
            f.write(b"x" * 1048576)
            f.flush()
            n += 1
    except OSError as e:
        pass
    time.sleep(30)
    return {"held": n}
`;

/** The same with a file that never had a name. */
const TMPFILE = `import os, time
def main(p):
    fd = os.open(".", os.O_TMPFILE | os.O_WRONLY, 0o600)
    n = 0
    try:
        while True:
            os.write(fd, b"x" * 1048576)
            n += 1
    except OSError as e:
        pass
    time.sleep(30)
    return {"held": n}
`;

/** The same, then mapped and closed: only the mapping holds it. */
const MAPPED = `import mmap, os, time
def main(p):
    f = open("m", "wb+")
    os.unlink("m")
    n = 0
    try:
        while True:
            f.write(b"x" * 1048576)
            f.flush()
            n += 1
    except OSError as e:
        pass
    m = mmap.mmap(f.fileno(), n * 1048576)
    f.close()
    time.sleep(30)
    return {"held": n, "mapped": len(m)}
`;

/** Empty files until the filesystem has no inode left; they cost no bytes. */
const INODE_FILL = `import os
def main(p):
    n = 0
    try:
        while True:
            open("e%d" % n, "wb").close()
            n += 1
    except OSError as e:
        return {"files": n, "errno": e.errno}
`;

/**
 * An honest node that writes a little file; with `gate` it then waits for the test's `go`
 * (test/helpers/gate-file.ts), so it is certainly running while the attacker fills the disk.
 */
const HONEST_SLOW = `import os, time
def main(p):
    with open("report.csv", "w") as f:
        f.write("id,total\\n1,42\\n" * 1000)
    if p.get("gate"):
        for _ in range(1200):
            if os.path.exists("go"):
                break
            time.sleep(0.05)
    return {"ok": True}
`;

const flowOf = (code: string) => ({
  vertexes: [
    { id: "in", type: "input" },
    { id: "s", type: "script", config: { code } },
  ],
  edges: [{ source: "in", target: "s" }],
});

const statfsFree = (dir: string) => {
  const s = fs.statfsSync(dir);
  return s.bavail * s.bsize;
};

const until = (cond: () => boolean, what: string) =>
  pollUntil(cond, (ok) => ok, what, { ms: 20_000, everyMs: 20 });

describe(`the disk watch sees what the walk does not (${TEST_MODE})`, {
  skip: process.getuid?.() !== 0 && "mounting a small filesystem for the data directory needs root",
}, () => {
  let server: TestServer;
  let mountPoint: string;

  const runSync = (scope: typeof VICTIM, elementName: string, parameter: unknown = {}) =>
    server.call("POST", `${DF}/run-sync`, {
      headers: scopeHeaders(scope),
      body: { elementName, path: "/f", parameter },
    });

  before(async () => {
    mountPoint = fs.mkdtempSync(path.join(os.tmpdir(), "sluice-small-fs-"));
    execFileSync("mount", [
      "-t",
      "tmpfs",
      "-o",
      `size=${SIZE},nr_inodes=${INODES},mode=0755`,
      "tmpfs",
      mountPoint,
    ]);
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
    await deployAndActivate(server, "hidden", flowOf(HIDDEN), keep, a, "/f");
    await deployAndActivate(server, "tmpfile", flowOf(TMPFILE), keep, a, "/f");
    await deployAndActivate(server, "mapped", flowOf(MAPPED), keep, a, "/f");
    await deployAndActivate(server, "inodes", flowOf(INODE_FILL), keep, a, "/f");
    const v = scopeHeaders(VICTIM);
    await deployAndActivate(server, "honest", flowOf(HONEST_SLOW), keep, v, "/f");
  });
  after(async () => {
    await server?.close();
    execFileSync("umount", [mountPoint]);
    fs.rmdirSync(mountPoint);
  });

  for (const name of ["hidden", "tmpfile", "mapped"]) {
    it(`a node holding a ${name} file fills no more than its budget; another tenant's running node is not the one stopped`, async () => {
      // The honest node writes its small file and waits for its gate: it is running when the
      // disk fills, and is let go only once the attack has ended.
      const started = await server.call("POST", `${DF}/run`, {
        headers: scopeHeaders(VICTIM),
        body: { elementName: "honest", path: "/f", parameter: { gate: true } },
      });
      const honestId = started.body.data as string;
      assert.equal(started.body.status, true, started.text);
      await until(
        () => fs.existsSync(path.join(mountPoint, "tasks", honestId, "report.csv")),
        "the honest node's file",
      );
      const attack = await runSync(ATTACKER, name);
      await release(mountPoint, honestId);
      const h = await server.call("GET", `${DF}/run/${honestId}/result?timeout=60`, {
        headers: scopeHeaders(VICTIM),
      });
      assert.equal(h.body.status, true, h.text);
      assert.equal(attack.body.status, false, attack.text);
      assert.match(
        attack.body.message,
        /SCRIPT_RUN_DISK_BYTES|DATA_DIR_FREE_BYTES_MIN/,
        attack.text,
      );
      await until(() => statfsFree(mountPoint) > SIZE / 2, "the held space to be freed");
      const again = await runSync(VICTIM, "honest", {});
      assert.equal(again.body.status, true, again.text);
    });
  }

  it("a node creating empty files until no inode is left is stopped; another tenant's runs go on", async () => {
    const attack = await runSync(ATTACKER, "inodes");
    const victim = await runSync(VICTIM, "honest", {});
    assert.equal(victim.body.status, true, victim.text);
    assert.equal(attack.body.status, false, attack.text);
    assert.match(attack.body.message, /SCRIPT_RUN_DISK_BYTES|DATA_DIR_FREE_BYTES_MIN/, attack.text);
    const runId = attack.headers.get("x-run-id") ?? "";
    await until(
      () => !fs.existsSync(path.join(mountPoint, "tasks", runId, "e1")),
      "the attacker's files to be removed",
    );
    const ok = await runSync(VICTIM, "honest", {});
    assert.equal(ok.body.status, true, ok.text);
  });
});
