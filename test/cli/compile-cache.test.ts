import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { after, describe, it } from "node:test";
import { BIN, sluice } from "../helpers/process.ts";

/** Node on `args`, with only PATH from this environment (as `sluice` of helpers/process.ts). */
function runNode(args: string[]): Promise<{ code: number; stderr: string }> {
  return new Promise((resolve) => {
    execFile(process.execPath, args, { env: { PATH: process.env.PATH ?? "" } }, (err, _o, stderr) =>
      resolve({ code: err ? (typeof err.code === "number" ? err.code : -1) : 0, stderr }),
    );
  });
}

/** What `sluice` keeps of V8's compiled sources between starts (docs/operations.md, "Start-up"). */
describe("the compile cache of the sluice command", () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "sluice-compile-"));
  after(() => fs.rmSync(dir, { recursive: true, force: true }));
  const entries = (d: string) =>
    fs.existsSync(d) ? fs.readdirSync(d, { recursive: true }).length : 0;

  it("is written where NODE_COMPILE_CACHE says, and not at all with NODE_DISABLE_COMPILE_CACHE=1", async () => {
    const kept = path.join(dir, "kept");
    const first = await sluice(["--help"], { NODE_COMPILE_CACHE: kept });
    assert.equal(first.code, 0, first.stderr);
    assert.ok(entries(kept) > 0, "compiled sources kept");
    const off = path.join(dir, "off");
    const second = await sluice(["--help"], {
      NODE_COMPILE_CACHE: off,
      NODE_DISABLE_COMPILE_CACHE: "1",
    });
    assert.equal(second.code, 0, second.stderr);
    assert.equal(entries(off), 0);
  });

  it("is kept under the install's node_modules when its path has a space or an accent", async () => {
    // A copy of the command in "a dir é/bin", reaching the sources through a link: a path that
    // a file URL spells with %20 and %C3%A9, which is not the directory's name.
    const install = path.join(dir, "a dir é");
    fs.mkdirSync(path.join(install, "bin"), { recursive: true });
    fs.mkdirSync(path.join(install, "node_modules"));
    fs.copyFileSync(BIN, path.join(install, "bin", "sluice.js"));
    fs.symlinkSync(path.resolve(import.meta.dirname, "../../src"), path.join(install, "src"));
    const r = await runNode([path.join(install, "bin", "sluice.js"), "--help"]);
    assert.equal(r.code, 0, r.stderr);
    assert.ok(entries(path.join(install, "node_modules/.cache/sluice-compile")) > 0);
    const named = fs.readdirSync(dir).filter((n) => n.includes("%"));
    assert.deepEqual(named, [], "no directory named by its URL");
  });
});
