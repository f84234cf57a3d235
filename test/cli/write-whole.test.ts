import assert from "node:assert/strict";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { after, describe, it } from "node:test";
import { writeWhole } from "../../src/cli/write-whole.ts";

/**
 * `-o FILE` written whole (docs/cli.md, "Output files"): a FILE the user had made private stays
 * private, and a part file someone else left under the part's name (a link to another file of the
 * user's) is replaced, never written through.
 */
describe("writeWhole", () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "sluice-write-whole-"));
  after(() => fs.rmSync(dir, { recursive: true, force: true }));

  it("keeps the permissions of the file it replaces", async () => {
    const file = path.join(dir, "export.json");
    fs.writeFileSync(file, "old", { mode: 0o600 });
    fs.chmodSync(file, 0o600);
    await writeWhole(file, "new");
    assert.equal(fs.readFileSync(file, "utf8"), "new");
    assert.equal(fs.statSync(file).mode & 0o777, 0o600);
  });

  it("does not write through a link planted under the part's name", async () => {
    const victim = path.join(dir, "victim");
    fs.writeFileSync(victim, "precious");
    const file = path.join(dir, "out.bin");
    fs.symlinkSync(victim, path.join(dir, ".out.bin.sluice-part"));
    await writeWhole(file, "artifact");
    assert.equal(fs.readFileSync(victim, "utf8"), "precious");
    assert.equal(fs.readFileSync(file, "utf8"), "artifact");
    assert.equal(fs.lstatSync(file).isSymbolicLink(), false);
  });
});
