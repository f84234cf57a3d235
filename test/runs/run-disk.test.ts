import assert from "node:assert/strict";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { after, describe, it } from "node:test";
import { createDataDisk, type DiskProbe } from "../../src/runs/run-disk.ts";
import { createFakeClock } from "../scheduler/fake-clock.ts";

/**
 * The watcher of runs' directories on the data directory's disk (docs/security.md, "Disk"), on a
 * fake clock and a fake filesystem: when it walks a directory, when it stops a run, what it removes.
 */

const MiB = 1024 * 1024;
const silent = { error() {} };
const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), "sluice-run-disk-"));
after(() => fs.rmSync(dataDir, { recursive: true, force: true }));

/** A filesystem whose free and used bytes and directory sizes the test sets; walks are counted. */
function fakeFs(free: number) {
  const state = { free, used: 0, sizes: new Map<string, number>(), walks: [] as string[] };
  const probe: DiskProbe = {
    space: async () => ({ free: state.free, used: state.used }),
    async size(dir) {
      state.walks.push(path.basename(dir));
      return state.sizes.get(path.basename(dir)) ?? 0;
    },
  };
  /** A run's task writes `bytes`: its directory and the filesystem grow. */
  const write = (runId: string, bytes: number) => {
    state.sizes.set(runId, (state.sizes.get(runId) ?? 0) + bytes);
    state.used += bytes;
    state.free -= bytes;
  };
  return { state, probe, write };
}

function setup(free = 1000 * MiB, config: { runBytes?: number; freeBytesMin?: number } = {}) {
  const clock = createFakeClock();
  const f = fakeFs(free);
  const disk = createDataDisk({
    config: {
      dataDir,
      runBytes: 100 * MiB,
      freeBytesMin: 50 * MiB,
      checkMs: 100,
      keptBytesPerApp: 0,
      ...config,
    },
    clock,
    logger: silent,
    runs: { getRun: async () => undefined, markFilesRemoved: async () => {} },
    probe: f.probe,
  });
  return { clock, disk, ...f };
}

/** A stop callback that records the kill and can be awaited. */
function killSwitch() {
  let fire: () => void = () => {};
  const killed = new Promise<void>((resolve) => {
    fire = resolve;
  });
  return { stop: () => fire(), killed };
}

describe("the data directory's disk watcher", () => {
  it("never walks a run that cannot have passed its budget, and arms no timer once its nodes end", async () => {
    const t = setup();
    const run = t.disk.forRun("quiet");
    assert.equal(await run.admit(), undefined);
    const w = run.watch(() => assert.fail("not stopped"));
    for (let i = 0; i < 5; i++) {
      t.write("quiet", 10 * MiB); // 50 MiB in all, under the 100 MiB budget
      await t.clock.advanceAsync(100);
    }
    assert.equal(await w.end(), undefined);
    assert.deepEqual(t.state.walks, [], "growth under the budget needs no walk");
    assert.equal(t.clock.pending(), 0, "no node runs: no timer");
    t.disk.close();
  });

  it("walks once the filesystem grew by more than the budget allows, and stops a run past it", async () => {
    const t = setup();
    const dir = path.join(dataDir, "tasks", "big");
    fs.mkdirSync(path.join(dir, "sub"), { recursive: true });
    const quiet = t.disk.forRun("other");
    const run = t.disk.forRun("big");
    assert.equal(await quiet.admit(), undefined);
    assert.equal(await run.admit(), undefined); // the directory exists: walked at its first check
    fs.writeFileSync(path.join(dir, "a"), "x");
    fs.writeFileSync(path.join(dir, "sub", "b"), "y");
    const k = killSwitch();
    const wq = quiet.watch(() => assert.fail("the other run is not stopped"));
    const w = run.watch(k.stop);
    await t.clock.advanceAsync(100);
    await wq.end();
    assert.deepEqual(t.state.walks, ["big"], "only the run not known empty was walked");
    t.write("big", 60 * MiB);
    await t.clock.advanceAsync(100);
    assert.deepEqual(t.state.walks, ["big"], "60 MiB of growth cannot pass 100 MiB");
    t.write("big", 60 * MiB);
    await t.clock.advanceAsync(100);
    await k.killed;
    const why = await w.end();
    assert.match(why ?? "", /SCRIPT_RUN_DISK_BYTES \(104857600\)/);
    assert.equal(run.stopped, why);
    assert.deepEqual(fs.readdirSync(dir), [], "its files were removed, the directory stays");
    assert.match((await run.admit()) ?? "", /SCRIPT_RUN_DISK_BYTES/, "no later node of it starts");
    t.disk.close();
  });

  it("walks again when space was freed meanwhile (the growth then hides what the run wrote)", async () => {
    const t = setup();
    const run = t.disk.forRun("hidden");
    await run.admit();
    const w = run.watch(() => {});
    t.write("hidden", 10 * MiB);
    t.state.used -= 20 * MiB; // another run's files removed
    await t.clock.advanceAsync(100);
    await w.end();
    assert.deepEqual(t.state.walks, ["hidden"]);
    t.disk.close();
  });

  it("a node that ends past the budget before any tick is caught by the check at its end", async () => {
    const t = setup();
    const run = t.disk.forRun("fast");
    await run.admit();
    const w = run.watch(() => {});
    t.write("fast", 150 * MiB);
    assert.match((await w.end()) ?? "", /SCRIPT_RUN_DISK_BYTES/);
    t.disk.close();
  });

  it("below the floor: new nodes are refused, the run holding the most is stopped", async () => {
    const t = setup(200 * MiB, { runBytes: 500 * MiB });
    const small = t.disk.forRun("small");
    const large = t.disk.forRun("large");
    await small.admit();
    await large.admit();
    const k = killSwitch();
    const ws = small.watch(() => assert.fail("the smaller run goes on"));
    const wl = large.watch(k.stop);
    t.write("small", 40 * MiB);
    t.write("large", 90 * MiB); // 70 MiB free, above the floor
    await t.clock.advanceAsync(100);
    t.write("large", 30 * MiB); // 40 MiB free, below it; neither run past its budget
    await t.clock.advanceAsync(100);
    await k.killed;
    const refused = await t.disk.forRun("new").admit();
    assert.match(refused ?? "", /DATA_DIR_FREE_BYTES_MIN/);
    assert.deepEqual(await t.disk.state(), { freeBytes: 40 * MiB, low: true });
    assert.match(
      (await wl.end()) ?? "",
      /DATA_DIR_FREE_BYTES_MIN \(52428800\).*held the most \(125829120/,
    );
    t.state.free += 120 * MiB; // what removing its files freed
    t.state.used -= 120 * MiB;
    assert.equal(await ws.end(), undefined, "above the floor again, the other run goes on");
    await t.clock.advanceAsync(100); // the state read is at most DATA_DIR_CHECK_MS old
    assert.equal(await t.disk.forRun("later").admit(), undefined);
    t.disk.close();
  });

  it("deleted files a run's processes hold count to its budget; the run whose files are visible goes on", async () => {
    const t = setup(200 * MiB, { runBytes: 100 * MiB });
    const held = new Map<string, number>();
    t.probe.held = async (_dataDir, dirs) =>
      new Map(dirs.map((dir) => [dir, held.get(path.basename(dir)) ?? 0]));
    const honest = t.disk.forRun("honest");
    const hider = t.disk.forRun("hider");
    await honest.admit();
    await hider.admit();
    const k = killSwitch();
    const wh = honest.watch(() => assert.fail("the run whose files are visible goes on"));
    const wx = hider.watch(k.stop);
    t.write("honest", 1 * MiB);
    // The hider writes 160 MiB into a file it deleted: its directory stays empty.
    t.state.used += 160 * MiB;
    t.state.free -= 160 * MiB;
    held.set("hider", 160 * MiB);
    await t.clock.advanceAsync(100);
    await k.killed;
    // Its process killed, the file it held goes.
    held.delete("hider");
    t.state.used -= 160 * MiB;
    t.state.free += 160 * MiB;
    assert.match((await wx.end()) ?? "", /holds 167772160 bytes, past SCRIPT_RUN_DISK_BYTES/);
    assert.equal(await wh.end(), undefined);
    t.disk.close();
  });

  it("0 turns the budget and the floor off", async () => {
    const t = setup(10 * MiB, { runBytes: 0, freeBytesMin: 0 });
    const run = t.disk.forRun("free");
    assert.equal(await run.admit(), undefined);
    const w = run.watch(() => assert.fail("not stopped"));
    t.write("free", 5 * 1024 * MiB);
    await t.clock.advanceAsync(100);
    assert.equal(await w.end(), undefined);
    assert.deepEqual(t.state.walks, []);
    t.disk.close();
  });
});
