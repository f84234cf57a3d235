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

/**
 * chgrpTree hands a kept directory to the next task's group at every script node's start of its
 * run (src/scripts/python-runner-workdir.ts): a descriptor per level was the same exhaustion, at
 * each node start, for a tree well within the disk budget (20,000 levels: 80 MB of directories).
 */
describe("chgrpTree of a tree deeper than the process has descriptors", () => {
  it("gives every file and directory to the group with a few descriptors, and changes nothing outside", () => {
    const root = fs.mkdtempSync(path.join(os.tmpdir(), "sluice-deep-grp-"));
    try {
      fs.mkdirSync(path.join(root, "run"));
      fs.writeFileSync(path.join(root, "outside"), "x");
      const made = spawnSync(
        "/usr/bin/python3",
        [
          "-c",
          "import os,sys\nos.chdir(sys.argv[1])\nfor i in range(2000):\n    open('f', 'w').close()\n    os.mkdir('d')\n    os.mkdir('e')\n    os.chdir('d')\nopen('f','w').write('x')\n",
          path.join(root, "run"),
        ],
        { encoding: "utf8" },
      );
      assert.equal(made.status, 0, made.stderr);
      const done = spawnSync(
        "prlimit",
        [
          "--nofile=256",
          process.execPath,
          "--input-type=module",
          "-e",
          `import { chgrpTree } from ${JSON.stringify(SAFE_TREE)}; await chgrpTree(process.argv[1], 4321);`,
          path.join(root, "run"),
        ],
        { encoding: "utf8" },
      );
      assert.equal(done.status, 0, done.stderr);
      // Every entry of the tree, read with a walk by path (the test's own, not Sluice's).
      const groups = spawnSync(
        "/usr/bin/python3",
        [
          "-c",
          "import os,sys\nos.chdir(sys.argv[1])\nn=0;bad=0\nwhile True:\n    for e in ('f','d','e'):\n        if os.path.lexists(e):\n            n+=1; bad += os.lstat(e).st_gid != 4321\n    if not os.path.isdir('d'): break\n    os.chdir('d')\nprint(n, bad, os.stat(sys.argv[1]).st_gid)\n",
          path.join(root, "run"),
        ],
        { encoding: "utf8" },
      );
      assert.equal(groups.stdout.trim(), "6001 0 4321", groups.stderr);
      assert.equal(fs.statSync(path.join(root, "outside")).gid, 0, "nothing outside changed");
      assert.notEqual(fs.statSync(root).gid, 4321);
    } finally {
      spawnSync("rm", ["-rf", root]);
    }
  });
});
