import assert from "node:assert/strict";
import fs from "node:fs";
import { after, before, describe, it } from "node:test";
import { scopeHeaders, startServer, type TestServer, upload } from "../helpers/server.ts";

/**
 * Attack of issue 12, item 7, as a tenant would upload it (docs/security.md, "Attacks the suite
 * performs"): a script writes twice its disk limit into its working directory and into /tmp.
 * Defence: each task writes into tmpfs mounts of SCRIPT_DISK_BYTES of its own (its mount
 * namespace, set up in the pre-forked child), never into the filesystem of the data directory.
 */

const LIMIT = 8 * 1024 * 1024;

/** Writes 2 × the limit into `p.where`, uncaught: the run must fail with the size error. */
const FILL = `import os
def main(p):
    with open(os.path.join(p["where"], "fill"), "wb") as f:
        for _ in range(2 * p["limit"] // 65536):
            f.write(b"x" * 65536)
            f.flush()
    return "wrote it all"
`;

/**
 * The same, caught: how much got written, and where it went: the filesystem of the working
 * directory (and of /tmp) against that of the directory above it, which is the data directory's.
 */
const MEASURE = `import os
def fill(path, limit):
    written = 0
    try:
        with open(path, "wb") as f:
            while written < 2 * limit:
                f.write(b"x" * 65536)
                f.flush()
                written += 65536
    except OSError as e:
        return {"written": written, "errno": e.errno}
    return {"written": written, "errno": None}
def size(path):
    s = os.statvfs(path)
    return s.f_blocks * s.f_frsize
def main(p):
    return {
        "cwd": fill("fill", p["limit"]),
        "tmp": fill("/tmp/fill", p["limit"]),
        "cwdSize": size("."),
        "tmpSize": size("/tmp"),
        "ownFilesystem": os.stat(".").st_dev != os.stat("..").st_dev,
    }
`;

/** What a later task finds in its directory and in /tmp. */
const LIST = `import os
def main(p=None):
    return {"cwd": sorted(os.listdir(".")), "tmp": sorted(os.listdir("/tmp"))}
`;

/** The service's mounts on /tmp or under the data directory, where tasks mount their tmpfs. */
const mountsAt = (dataDir: string): string[] =>
  fs
    .readFileSync("/proc/self/mountinfo", "utf8")
    .split("\n")
    .filter((l) => {
      const point = l.split(" ")[4] ?? "";
      return point === "/tmp" || point.startsWith(dataDir);
    });

async function run(server: TestServer, name: string, body: unknown) {
  return server.call("POST", `/script/external/${name}/run-sync?path=/d`, {
    headers: scopeHeaders(),
    body,
  });
}

for (const sandbox of ["auto", "none"] as const) {
  describe(`a task cannot fill the host's disk (SCRIPT_SANDBOX=${sandbox})`, {
    skip: process.getuid?.() !== 0 && "tmpfs mounts of a task's own need root",
  }, () => {
    let server: TestServer;
    // The tests' data directory lies under /tmp: with SCRIPT_SANDBOX=none a tmpfs on /tmp would
    // hide it, so there tasks keep the host's /tmp (docs/script-service.md).
    const ownTmp = sandbox === "auto";
    before(async () => {
      server = await startServer({ SCRIPT_SANDBOX: sandbox, SCRIPT_DISK_BYTES: String(LIMIT) });
      const r = await upload(
        server,
        [
          { name: "fill.py", content: FILL },
          { name: "measure.py", content: MEASURE },
          { name: "list.py", content: LIST },
        ],
        { path: "/d" },
      );
      assert.ok(
        r.body.data.every((i: { status: number }) => i.status === 0),
        r.text,
      );
    });
    after(() => server.close());

    const places = ownTmp ? ["working directory", "/tmp"] : ["working directory"];
    for (const place of places) {
      it(`item 7: writing twice the limit into its ${place} fails the run with the size error`, async () => {
        const r = await run(server, "fill", {
          where: place === "/tmp" ? "/tmp" : ".",
          limit: LIMIT,
        });
        assert.equal(r.headers.get("x-task-status"), "FAILURE", r.text);
        assert.equal(r.body.code, 28030001, r.text);
        assert.match(r.body.message, /^OSError: \[Errno 28\] No space left on device/);
        assert.match(r.body.message, new RegExp(`disk limit: ${LIMIT} bytes`));
      });
    }

    it("item 7: what a task writes lands in tmpfs mounts of the limit, not on the data directory's filesystem", async () => {
      const mountsBefore = mountsAt(server.dataDir);
      const r = await run(server, "measure", { limit: LIMIT });
      assert.equal(r.headers.get("x-task-status"), "SUCCESS", r.text);
      const m = r.body;
      assert.equal(m.ownFilesystem, true, "the working directory is a filesystem of its own");
      assert.equal(m.cwdSize, LIMIT);
      assert.equal(m.cwd.errno, 28, JSON.stringify(m));
      assert.ok(m.cwd.written <= LIMIT, JSON.stringify(m));
      if (ownTmp) {
        assert.equal(m.tmpSize, LIMIT);
        assert.equal(m.tmp.errno, 28, JSON.stringify(m));
        assert.ok(m.tmp.written <= LIMIT, JSON.stringify(m));
      }
      // Its mounts stayed in its own mount namespace: none reached the service's (with
      // SCRIPT_SANDBOX=none the zygote shares the host's, whose mounts propagate unless made
      // private first; bubblewrap's already are, docs/security.md "Disk").
      assert.deepEqual(mountsAt(server.dataDir), mountsBefore);
      // A later task (which may get the same reused directory) starts with nothing.
      for (let i = 0; i < 3; i++) {
        const later = await run(server, "list", {});
        assert.equal(later.headers.get("x-task-status"), "SUCCESS", later.text);
        assert.deepEqual(later.body.cwd, []);
        if (ownTmp) assert.deepEqual(later.body.tmp, []);
      }
    });
  });
}
