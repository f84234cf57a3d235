import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { describe, it } from "node:test";

/**
 * A flow run's kept directory is a tree its scripts made, and Node removes it (src/scripts/
 * safe-tree.ts). A task nests directories about 2,700 levels a second (40,000 in 15 s, within the
 * default disk budget); removeTree held a descriptor per level, so removing such a tree took the
 * service to its descriptor limit (EMFILE for every open of the service meanwhile: sockets, the
 * database's files, task pipes) and failed, leaving the tree (docs/security.md, "Disk"). Here the
 * removal runs in a process limited to 256 descriptors, on a tree 2,000 levels deep.
 */

const SAFE_TREE = new URL("../../src/scripts/safe-tree.ts", import.meta.url).pathname;

describe("removeTree of a tree deeper than the process has descriptors", () => {
  it("removes all of it with a few descriptors", () => {
    const root = fs.mkdtempSync(path.join(os.tmpdir(), "sluice-deep-"));
    try {
      fs.mkdirSync(path.join(root, "run"));
      const made = spawnSync(
        "/usr/bin/python3",
        [
          "-c",
          "import os,sys\nos.chdir(sys.argv[1])\nfor _ in range(2000):\n    os.mkdir('d')\n    os.chdir('d')\nopen('f','w').write('x')\n",
          path.join(root, "run"),
        ],
        { encoding: "utf8" },
      );
      assert.equal(made.status, 0, made.stderr);
      const removed = spawnSync(
        "prlimit",
        [
          "--nofile=256",
          process.execPath,
          "--input-type=module",
          "-e",
          `import { removeTree } from ${JSON.stringify(SAFE_TREE)}; await removeTree(process.argv[1]);`,
          path.join(root, "run"),
        ],
        { encoding: "utf8" },
      );
      assert.equal(removed.status, 0, removed.stderr);
      assert.deepEqual(fs.readdirSync(root), [], "nothing of the tree is left");
    } finally {
      spawnSync("rm", ["-rf", root]);
    }
  });
});
