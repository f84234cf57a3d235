import assert from "node:assert/strict";
import { mkdirSync, mkdtempSync, readdirSync, rmSync, utimesSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { describe, it } from "node:test";
import { removeStaleBuilds } from "../../src/scripts/env-build.ts";

describe("environment builds a crash left behind", () => {
  it("removes build and home folders older than any live build, cut-off removals, and nothing else", async () => {
    const root = mkdtempSync(path.join(os.tmpdir(), "sluice-envs-"));
    try {
      const now = Date.now();
      const made = (name: string, ageMs: number) => {
        const p = path.join(root, name);
        mkdirSync(path.join(p, "lib"), { recursive: true });
        const t = (now - ageMs) / 1000;
        utimesSync(p, t, t);
      };
      made(".build-old", 3_600_000);
      made(".home-old", 3_600_000);
      made(".build-live", 1_000); // a build under way
      made(".gone-0123-live", 1_000); // a removal a crash cut off: nothing uses it, at any age
      made("0123456789abcdef0123456789abcdef", 3_600_000); // an environment: not this pass's
      const gone = await removeStaleBuilds(root, now, 600_000);
      assert.deepEqual(gone.sort(), [".build-old", ".gone-0123-live", ".home-old"]);
      assert.deepEqual(readdirSync(root).sort(), [
        ".build-live",
        "0123456789abcdef0123456789abcdef",
      ]);
      assert.deepEqual(await removeStaleBuilds(path.join(root, "missing"), now, 1), []);
    } finally {
      rmSync(root, { recursive: true, force: true });
    }
  });
});
