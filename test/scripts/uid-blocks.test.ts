import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { describe, it, mock } from "node:test";
import { claimUidBlock } from "../../src/scripts/uid-blocks.ts";

describe("sandbox uid blocks", () => {
  const range = { uidBase: 300000, uidCount: 1024 };

  it("gives two runners of one process different blocks and frees them on release", () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), "uidb-"));
    const a = claimUidBlock(range, 256, dir);
    const b = claimUidBlock(range, 256, dir);
    assert.notEqual(a.base, b.base);
    a.release();
    const c = claimUidBlock(range, 256, dir);
    assert.equal(c.base, a.base);
    b.release();
    c.release();
  });

  it("skips a block held by a live process and takes over a dead one's", async () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), "uidb-"));
    const sleeper = spawn("sleep", ["30"]);
    fs.writeFileSync(path.join(dir, "300000"), String(sleeper.pid));
    fs.writeFileSync(path.join(dir, "300256"), "999999999");
    const mine = claimUidBlock(range, 256, dir);
    assert.equal(mine.base, 300256, "the dead owner's block is reused, the live one's is not");
    sleeper.kill();
    mine.release();
  });

  it("fails clearly when every block is taken", () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), "uidb-"));
    const held = [
      claimUidBlock({ uidBase: 1, uidCount: 512 }, 256, dir),
      claimUidBlock({ uidBase: 1, uidCount: 512 }, 256, dir),
    ];
    assert.throws(() => claimUidBlock({ uidBase: 1, uidCount: 512 }, 256, dir), /SCRIPT_UID_COUNT/);
    for (const h of held) h.release();
  });
});

describe("sandbox uid blocks of different sizes on one host", () => {
  const range = { uidBase: 300000, uidCount: 4096 };

  it("does not take a block that overlaps a live block of another size", async () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), "uidb-"));
    // A process that cut the range in blocks of 772 holds the second one: 300772..301543.
    const other = spawn("sleep", ["30"]);
    fs.writeFileSync(path.join(dir, "300772"), `${other.pid} 772`);
    const mine = [1, 2, 3, 4].map(() => claimUidBlock(range, 256, dir));
    const overlaps = (base: number) => base < 300772 + 772 && 300772 < base + 256;
    for (const b of mine) assert.ok(!overlaps(b.base), `block ${b.base} overlaps the live one`);
    // 300768, 301024, 301280 and 301536 each share uids with 300772..301543.
    assert.deepEqual(
      mine.map((b) => b.base),
      [300000, 300256, 300512, 301792],
    );
    other.kill();
    for (const b of mine) b.release();
  });

  it("reads an older lock without a size as a block of 256", () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), "uidb-"));
    const other = spawn("sleep", ["30"]);
    fs.writeFileSync(path.join(dir, "300256"), String(other.pid));
    const mine = claimUidBlock(range, 772, dir);
    assert.equal(mine.base, 300772, "300000..300771 shares uids with the older 300256..300511");
    other.kill();
    mine.release();
  });
  it("gives way to a block above it taken between its look and its lock", () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), "uidb-"));
    const other = spawn("sleep", ["30"]);
    // The other process (blocks of 256) looks, finds nothing, locks 300256 and looks again
    // below it, all while this one, having looked, has not written its lock yet.
    const write = fs.writeFileSync;
    let raced = false;
    const spy = mock.method(fs, "writeFileSync", (...args: Parameters<typeof write>) => {
      if (!raced && args[0] === path.join(dir, "300000")) {
        raced = true;
        write(path.join(dir, "300256"), `${other.pid} 256`, { flag: "wx" });
      }
      return write(...args);
    });
    try {
      const mine = claimUidBlock(range, 772, dir);
      assert.ok(raced);
      const overlaps = mine.base < 300256 + 256 && 300256 < mine.base + 772;
      assert.ok(
        !overlaps,
        `block ${mine.base}..${mine.base + 771} overlaps the live 300256..300511`,
      );
      mine.release();
    } finally {
      spy.mock.restore();
      other.kill();
    }
  });
});
