import assert from "node:assert/strict";
import {
  existsSync,
  mkdirSync,
  mkdtempSync,
  rmSync,
  statSync,
  symlinkSync,
  writeFileSync,
} from "node:fs";
import os from "node:os";
import path from "node:path";
import { after, before, describe, it } from "node:test";
import { type SliceUids, WorkDirs } from "../../src/scripts/python-runner-workdir.ts";
import { startSwapper } from "../helpers/symlink-swap.ts";

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

describe("a kept run directory handed to a new group", () => {
  let root: string;
  let outside: string;
  let dirs: WorkDirs;
  before(async () => {
    root = mkdtempSync(path.join(os.tmpdir(), "sluice-workdirs-race-"));
    outside = mkdtempSync(path.join(os.tmpdir(), "sluice-host-"));
    dirs = new WorkDirs({ root, uidBase: 310_000, uidCount: 16, switchUid: true });
    await dirs.init();
  });
  after(() => {
    rmSync(root, { recursive: true, force: true });
    rmSync(outside, { recursive: true, force: true });
  });

  it("never changes a file outside it, whatever a process inside swaps meanwhile", async () => {
    // A host file, root's, named like files of the run directory's subdirectory.
    const names = Array.from({ length: 40 }, (_, i) => `f${i}`);
    for (const n of names) writeFileSync(path.join(outside, n), "host");
    const first = await dirs.acquire("run-race", false);
    assert.ok(first);
    const sub = path.join(first.dir, "sub");
    mkdirSync(sub);
    for (const n of names) writeFileSync(path.join(sub, n), "run");
    symlinkSync(outside, path.join(first.dir, "lnk"));
    await dirs.release(first, true, async () => true);

    const swapper = await startSwapper(first.dir);
    try {
      const changed = () => names.filter((n) => statSync(path.join(outside, n)).gid !== 0);
      for (let i = 0; i < 150 && changed().length === 0; i++) {
        const wd = await dirs.acquire("run-race", false);
        assert.ok(wd);
        await dirs.release(wd, true, async () => true);
      }
      assert.deepEqual(changed(), []);
    } finally {
      swapper.kill("SIGKILL");
    }
  });
  it("never removes a file outside it, whatever a process inside swaps meanwhile", async () => {
    const names = Array.from({ length: 40 }, (_, i) => `g${i}`);
    for (const n of names) writeFileSync(path.join(outside, n), "host");
    const gone = () => names.filter((n) => !existsSync(path.join(outside, n)));
    for (let i = 0; i < 40 && gone().length === 0; i++) {
      const wd = await dirs.acquire(`run-rm${i}`, false);
      assert.ok(wd);
      const sub = path.join(wd.dir, "sub");
      mkdirSync(sub);
      for (const n of names) writeFileSync(path.join(sub, n), "run");
      symlinkSync(outside, path.join(wd.dir, "lnk"));
      const swapper = await startSwapper(wd.dir);
      try {
        // It may fail (the tree changes under it); it must not reach outside.
        await dirs.release(wd, false, async () => true).catch(() => {});
      } finally {
        swapper.kill("SIGKILL");
      }
    }
    assert.deepEqual(gone(), []);
  });
});
