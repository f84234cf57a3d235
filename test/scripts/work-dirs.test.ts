import assert from "node:assert/strict";
import { mkdtempSync, rmSync, statSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { after, before, describe, it } from "node:test";
import { type SliceUids, WorkDirs } from "../../src/scripts/python-runner-workdir.ts";

/** A slice whose holds the test counts (docs/security.md, "Preloading"). */
function slice(base: number, count: number) {
  const s = { base, count, held: 0, hold: () => () => {} };
  s.hold = () => {
    s.held++;
    let done = false;
    return () => {
      if (!done) s.held--;
      done = true;
    };
  };
  return s satisfies SliceUids;
}

const inSlice = (id: number | undefined, s: { base: number; count: number }) =>
  id !== undefined && id >= s.base && id < s.base + s.count;

describe("working directories of preloading zygotes' tasks", () => {
  let root: string;
  let dirs: WorkDirs;
  before(async () => {
    root = mkdtempSync(path.join(os.tmpdir(), "sluice-workdirs-"));
    dirs = new WorkDirs({ root, uidBase: 300_000, uidCount: 16, switchUid: true });
    await dirs.init();
  });
  after(() => rmSync(root, { recursive: true, force: true }));

  it("gives a private directory a uid of the slice", async () => {
    const s = slice(300_100, 8);
    const wd = await dirs.acquire("t1", true, s);
    assert.ok(wd && inSlice(wd.uid, s), JSON.stringify(wd));
    await dirs.release(wd, false, async () => true);
  });

  it("gives a shared directory no task uses a group of the slice, and holds the slice until it is cleaned up", async () => {
    const s = slice(300_200, 8);
    const wd = await dirs.acquire("run-a", false, s);
    assert.ok(wd && inSlice(wd.gid, s) && inSlice(wd.uid, s), JSON.stringify(wd));
    assert.equal(statSync(wd.dir).gid, wd.gid);
    assert.equal(s.held, 1);
    // A task of the default zygote joins the same group.
    const other = await dirs.acquire("run-a", false);
    assert.equal(other?.gid, wd.gid);
    await dirs.release(wd, true, async () => true);
    assert.equal(s.held, 1); // still in use
    await dirs.release(other as NonNullable<typeof other>, true, async () => true);
    assert.equal(s.held, 0);
  });

  it("refuses a slice's task a shared directory in use with a group of another range", async () => {
    const s = slice(300_300, 8);
    const first = await dirs.acquire("run-b", false);
    assert.ok(first && !inSlice(first.gid, s));
    assert.equal(await dirs.acquire("run-b", false, s), undefined);
    assert.equal(s.held, 0);
    await dirs.release(first, true, async () => true);
    // Once it is free, the next user's range decides its group (the kept files follow it).
    const again = await dirs.acquire("run-b", false, s);
    assert.ok(again && inSlice(again.gid, s), JSON.stringify(again));
    await dirs.release(again, true, async () => true);
    assert.equal(s.held, 0);
  });
});
