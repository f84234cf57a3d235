import assert from "node:assert/strict";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { after, describe, it } from "node:test";
import { sluice } from "../helpers/process.ts";

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

  // Node itself reads NODE_COMPILE_CACHE; the default directory is the command's own doing.
  it("is kept under node_modules/.cache by default", async () => {
    const home = path.resolve(import.meta.dirname, "../../node_modules/.cache/sluice-compile");
    // Only a cache: a process reading it meanwhile compiles what it misses.
    fs.rmSync(home, { recursive: true, force: true });
    const r = await sluice(["--help"]);
    assert.equal(r.code, 0, r.stderr);
    assert.ok(entries(home) > 0);
  });
});
