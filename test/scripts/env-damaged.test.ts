import assert from "node:assert/strict";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { describe, it } from "node:test";
import { systemClock } from "../../src/clock.ts";
import { loadConfig } from "../../src/config.ts";
import { buildEnv, MANIFEST, readManifest } from "../../src/scripts/env-build.ts";
import { writeWheel } from "../helpers/wheels.ts";

/**
 * docs/script-dependencies.md, "Caching and removal": a removal cut off by a crash before
 * removals went through a `.gone-` rename left `envs/<hash>` half deleted, without its manifest.
 * A build of the same set used to take it for complete (its rename found the name taken), so
 * every task of the element failed "its environment … vanished"; it is now moved aside and
 * replaced by the new build.
 */
/** One package's environment built under a fresh DATA_DIR/envs, then `check`, then removed. */
async function withBuilt(
  pkg: string,
  check: (t: {
    root: string;
    deps: Parameters<typeof buildEnv>[0];
    first: Extract<Awaited<ReturnType<typeof buildEnv>>, { ok: true }>;
  }) => Promise<void>,
): Promise<void> {
  const root = fs.mkdtempSync(path.join(os.tmpdir(), "sluice-env-damaged-"));
  const wheels = fs.mkdtempSync(path.join(os.tmpdir(), "sluice-wheels-"));
  try {
    const module = pkg.replaceAll("-", "_");
    writeWheel(wheels, {
      name: pkg,
      version: "1.0",
      files: { [`${module}/__init__.py`]: "VALUE = 7\n" },
      topLevel: [module],
    });
    const config = loadConfig({ DATA_DIR: root, PIP_NO_INDEX: "1", PIP_FIND_LINKS: wheels });
    const deps = {
      python: config.python.executable,
      envs: config.python.envs,
      root,
      clock: systemClock,
    };
    const first = await buildEnv(deps, [pkg], [pkg]);
    assert.ok(first.ok, JSON.stringify(first));
    await check({ root, deps, first });
  } finally {
    fs.rmSync(root, { recursive: true, force: true });
    fs.rmSync(wheels, { recursive: true, force: true });
  }
}

describe("an environment a crash left half deleted", () => {
  it("is replaced by the next build of the same set", async () => {
    await withBuilt("sluice-damaged", async ({ root, deps, first }) => {
      // What a cut-off recursive delete leaves: the manifest and part of the tree gone.
      fs.rmSync(path.join(first.dir, MANIFEST));
      fs.rmSync(path.join(first.dir, "bin"), { recursive: true, force: true });
      assert.equal(await readManifest(first.dir), undefined);
      const again = await buildEnv(deps, ["sluice-damaged"], ["sluice-damaged"]);
      assert.ok(again.ok, JSON.stringify(again));
      assert.equal(again.dir, first.dir);
      assert.equal((await readManifest(again.dir))?.hash, again.env.hash);
      assert.ok(fs.existsSync(path.join(again.dir, "bin")), "a whole environment again");
      assert.deepEqual(
        fs.readdirSync(root).filter((n) => n.startsWith(".")),
        [],
        "nothing left beside it",
      );
    });
  });

  it("one whose manifest is there but cannot be read is left as it is (zygotes may run from it)", async () => {
    // Only a missing manifest says "damaged". A read that fails for another reason (in life: no
    // descriptor left, EMFILE, on a busy node; here: a directory by the manifest's name) is of an
    // environment that was whole: moving it aside and deleting it pulled the files from under the
    // zygotes that have it bound, and their tasks' imports failed.
    await withBuilt("sluice-unread", async ({ deps, first }) => {
      const manifest = path.join(first.dir, MANIFEST);
      fs.rmSync(manifest);
      fs.mkdirSync(manifest); // present, and its read fails (EISDIR)
      const marker = path.join(first.dir, "in-use");
      fs.writeFileSync(marker, "a zygote's files\n");
      const inode = fs.statSync(first.dir).ino;
      const again = await buildEnv(deps, ["sluice-unread"], ["sluice-unread"]);
      assert.ok(again.ok, JSON.stringify(again));
      assert.equal(again.dir, first.dir);
      assert.equal(fs.statSync(again.dir).ino, inode, "the same directory, never moved aside");
      assert.ok(fs.existsSync(marker), "nothing of it deleted");
    });
  });
});
