import assert from "node:assert/strict";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { after, describe, it } from "node:test";
import { createKeptDirs } from "../../src/runs/kept-dirs.ts";
import { createDataDisk, type DiskProbe } from "../../src/runs/run-disk.ts";
import type { FilesRemoved, Run } from "../../src/store/types.ts";
import { createFakeClock } from "../scheduler/fake-clock.ts";

/**
 * The count of what ended runs keep on the data directory (docs/security.md, "Disk", "Kept
 * directories"), on a fake clock and a filesystem whose sizes the test sets: the bound per app,
 * the order in which directories are given back below the floor, the count rebuilt at start.
 * Directories are real (removals are), their sizes the test's.
 */

const silent = { error() {} };
const roots: string[] = [];
after(() => {
  for (const r of roots) fs.rmSync(r, { recursive: true, force: true });
});

function setup(
  opts: {
    perApp?: number;
    capacity?: number;
    runs?: Map<string, Run>;
    orphanAfterMs?: number;
  } = {},
) {
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), "sluice-kept-"));
  roots.push(dataDir);
  const clock = createFakeClock();
  const sizes = new Map<string, number>();
  const dirOf = (id: string) => path.join(dataDir, "tasks", id);
  const capacity = opts.capacity ?? 1000;
  /** What the kept directories still on disk take. */
  const used = () => [...sizes].reduce((a, [id, n]) => a + (fs.existsSync(dirOf(id)) ? n : 0), 0);
  const walks: string[] = [];
  const probe: DiskProbe = {
    space: async () => ({ free: capacity - used(), used: used() }),
    async size(dir) {
      walks.push(path.basename(dir));
      return fs.existsSync(dir) ? (sizes.get(path.basename(dir)) ?? 0) : 0;
    },
  };
  const notes = new Map<string, FilesRemoved>();
  /** The directories that were still there when their removal was noted. */
  const notedFirst = new Set<string>();
  const runs = {
    getRun: async (_scope: null, id: string) => opts.runs?.get(id),
    markFilesRemoved: async (id: string, note: FilesRemoved) => {
      notes.set(id, note);
      if (fs.existsSync(dirOf(id))) notedFirst.add(id);
    },
  };
  const inUse = new Set<string>();
  const kept = createKeptDirs({
    dataDir,
    perApp: opts.perApp ?? 0,
    clock,
    probe,
    runs,
    logger: silent,
    inUse: (id) => inUse.has(id),
    ...(opts.orphanAfterMs !== undefined ? { orphanAfterMs: opts.orphanAfterMs } : {}),
  });
  /** A run ended with `bytes` in its directory, `ms` after the previous. */
  const end = async (id: string, app: string, bytes: number) => {
    fs.mkdirSync(path.join(dirOf(id), "sub"), { recursive: true });
    fs.writeFileSync(path.join(dirOf(id), "sub", "f"), "x");
    sizes.set(id, bytes);
    clock.set(clock.now() + 1000);
    await kept.add(id, app);
  };
  const present = (ids: string[]) => ids.filter((id) => fs.existsSync(dirOf(id)));
  return {
    dataDir,
    clock,
    kept,
    end,
    present,
    notes,
    notedFirst,
    inUse,
    walks,
    used,
    probe,
    runs,
    sizes,
  };
}

describe("what ended runs keep, per app", () => {
  it("an app past SCRIPT_KEPT_BYTES_PER_APP gives back its oldest; other apps keep theirs", async () => {
    const t = setup({ perApp: 100 });
    await t.end("b1", "b", 90);
    await t.end("a1", "a", 40);
    await t.end("a2", "a", 40);
    assert.equal(t.kept.bytes("a"), 80);
    await t.end("a3", "a", 40);
    assert.deepEqual(t.present(["a1", "a2", "a3", "b1"]), ["a2", "a3", "b1"]);
    assert.equal(t.kept.bytes("a"), 80);
    assert.equal(t.kept.bytes("b"), 90);
    assert.match(
      t.notes.get("a1")?.reason ?? "",
      /held 120 bytes, past SCRIPT_KEPT_BYTES_PER_APP \(100\)/,
    );
    assert.equal(t.notes.get("a1")?.time, t.clock.now());
    // Noted before it went: a process killed in between leaves a note and the files (which the
    // next start counts and removes again), never files gone without a word.
    assert.ok(t.notedFirst.has("a1"), "noted while the directory was still there");
    // One directory past the bound on its own goes at once.
    await t.end("a4", "a", 150);
    assert.deepEqual(t.present(["a2", "a3", "a4"]), []);
    assert.equal(t.kept.bytes("a"), 0);
  });

  it("a directory already gone, or empty, counts nothing", async () => {
    const t = setup({ perApp: 100 });
    await t.kept.add("never", "a");
    assert.equal(t.kept.bytes(), 0);
    await t.end("a1", "a", 60);
    t.kept.forget("a1"); // the sweeper removed it
    assert.equal(t.kept.bytes("a"), 0);
    await t.end("a2", "a", 60);
    assert.deepEqual(t.present(["a1", "a2"]), ["a1", "a2"], "a1 is not counted any more");
  });

  it("below the floor: the app keeping the most gives back its oldest, until above it", async () => {
    const t = setup({ capacity: 300 });
    await t.end("a1", "a", 30);
    await t.end("b1", "b", 40);
    await t.end("a2", "a", 30);
    await t.end("b2", "b", 40);
    await t.end("a3", "a", 30);
    await t.end("c1", "c", 10);
    // 180 kept, 120 free; a floor of 200 needs 80 back.
    const free = async () => (await t.probe.space("")).free;
    const order: string[] = [];
    const all = ["a1", "a2", "a3", "b1", "b2", "c1"];
    const n = await t.kept.giveBack(async () => {
      for (const id of all)
        if (!fs.existsSync(path.join(t.dataDir, "tasks", id)) && !order.includes(id))
          order.push(id);
      return free();
    }, 200);
    // a holds 90 (b 80): a1 goes; then b holds the most: b1; then a (60 against 40): a2.
    assert.deepEqual(order, ["a1", "b1", "a2"]);
    assert.equal(n, 3);
    assert.ok((await free()) >= 200);
    assert.match(t.notes.get("b1")?.reason ?? "", /below DATA_DIR_FREE_BYTES_MIN \(200\)/);
    assert.equal(t.kept.bytes(), 80);
  });

  it("never gives back the directory of a run whose nodes run here, and stops when nothing is left", async () => {
    const t = setup({ capacity: 100 });
    await t.end("a1", "a", 50);
    await t.end("a2", "a", 20);
    t.inUse.add("a1");
    const n = await t.kept.giveBack(async () => (await t.probe.space("")).free, 90);
    assert.equal(n, 1);
    assert.deepEqual(t.present(["a1", "a2"]), ["a1"]);
  });

  it("at start, counts the directories of ended runs, oldest by their end, and bounds each app", async () => {
    const runOf = (id: string, app: string, endTime: number | null): Run =>
      ({ id, scope: { app, space: "s" }, endTime }) as Run;
    const runs = new Map<string, Run>([
      ["old", runOf("old", "a", 1000)],
      ["new", runOf("new", "a", 3000)],
      ["mid", runOf("mid", "a", 2000)],
      ["running", runOf("running", "a", null)],
      ["other", runOf("other", "b", 500)],
    ]);
    const t = setup({ perApp: 100, runs });
    for (const [id, n] of [
      ["old", 40],
      ["new", 40],
      ["mid", 40],
      ["running", 40],
      ["other", 40],
      ["u1234", 40], // a script task's directory: no run of that name
      ["deleted", 40], // a deleted run's: the sweeper's
    ] as const) {
      fs.mkdirSync(path.join(t.dataDir, "tasks", id), { recursive: true });
      t.sizes.set(id, n);
    }
    await t.kept.rebuild();
    assert.deepEqual(t.present(["old", "mid", "new", "running", "other", "u1234", "deleted"]), [
      "mid",
      "new",
      "running",
      "other",
      "u1234",
      "deleted",
    ]);
    assert.equal(t.kept.bytes("a"), 80);
    assert.equal(t.kept.bytes("b"), 40);
    assert.equal(t.kept.bytes(), 120);
    assert.ok(!t.walks.includes("running") && !t.walks.includes("u1234"), "not measured");
  });

  it("at start, a directory whose removal was noted but cut off (a kill in between) goes, uncounted", async () => {
    const noted = {
      id: "noted",
      scope: { app: "a", space: "s" },
      endTime: 1000,
      filesRemoved: {
        time: 1500,
        reason: "the app's kept run directories … past SCRIPT_KEPT_BYTES_PER_APP",
      },
    } as Run;
    const runs = new Map<string, Run>([
      ["noted", noted],
      ["kept", { id: "kept", scope: { app: "a", space: "s" }, endTime: 2000 } as Run],
    ]);
    const t = setup({ perApp: 100, runs });
    for (const id of ["noted", "kept"]) {
      fs.mkdirSync(path.join(t.dataDir, "tasks", id, "sub"), { recursive: true });
      t.sizes.set(id, 40);
    }
    await t.kept.rebuild();
    assert.deepEqual(t.present(["noted", "kept"]), ["kept"]);
    assert.equal(t.kept.bytes("a"), 40);
    assert.equal(t.notes.size, 0, "its note stands: not written again");
  });

  it("a deleted run's directory, older than any run, is counted as no app's and given back first", async () => {
    const runs = new Map<string, Run>([
      ["kept", { id: "kept", scope: { app: "a", space: "s" }, endTime: 1 } as Run],
    ]);
    const t = setup({ perApp: 1000, capacity: 200, runs, orphanAfterMs: 3_600_000 });
    t.clock.set(Date.now());
    const twoHoursAgo = new Date(Date.now() - 7_200_000);
    for (const [id, n] of [
      ["kept", 40],
      ["deleted", 70], // its run deleted two hours before this start
      ["fresh", 30], // no run yet: maybe another process's run-sync, still running
      ["u77", 20], // a script task's
    ] as const) {
      fs.mkdirSync(path.join(t.dataDir, "tasks", id), { recursive: true });
      t.sizes.set(id, n);
    }
    for (const id of ["kept", "deleted", "u77"])
      fs.utimesSync(path.join(t.dataDir, "tasks", id), twoHoursAgo, twoHoursAgo);
    await t.kept.rebuild();
    assert.equal(t.kept.bytes("a"), 40);
    assert.equal(t.kept.bytes(""), 70, "the deleted run's directory is counted, as no app's");
    assert.equal(t.kept.bytes(), 110);
    // 40 free (200 - 160), a floor of 100: the deleted run's directory goes before app a's.
    const n = await t.kept.giveBack(async () => (await t.probe.space("")).free, 100);
    assert.equal(n, 1);
    assert.deepEqual(t.present(["kept", "deleted", "fresh", "u77"]), ["kept", "fresh", "u77"]);
    assert.ok(!t.notes.has("deleted"), "no record to note it in");
  });

  it("below the floor, giving back does not wait for a rebuild still reading the store", async () => {
    let release: () => void = () => {};
    const gate = new Promise<void>((resolve) => {
      release = resolve;
    });
    const ended = { id: "old", scope: { app: "b", space: "s" }, endTime: 1 } as Run;
    const t = setup({ capacity: 100 });
    t.runs.getRun = async (_scope: null, id: string) => {
      await gate; // a store slow to answer, or many directories
      return id === "old" ? ended : undefined;
    };
    await t.end("a1", "a", 60);
    fs.mkdirSync(path.join(t.dataDir, "tasks", "old"), { recursive: true });
    t.sizes.set("old", 30);
    const rebuilt = t.kept.rebuild();
    // 10 free, a floor of 50: what this life counted goes at once.
    const n = await t.kept.giveBack(async () => (await t.probe.space("")).free, 50);
    assert.equal(n, 1);
    assert.deepEqual(t.present(["a1", "old"]), ["old"]);
    release();
    await rebuilt;
    assert.equal(t.kept.bytes("b"), 30, "the previous life's directory is counted");
  });
});

describe("the disk watch gives back kept directories before it refuses or stops", () => {
  function diskSetup() {
    const t = setup({ capacity: 1000 });
    const clock = createFakeClock();
    const disk = createDataDisk({
      config: {
        dataDir: t.dataDir,
        runBytes: 0,
        freeBytesMin: 100,
        checkMs: 100,
        keptBytesPerApp: 0,
      },
      clock,
      logger: silent,
      runs: t.runs,
      probe: t.probe,
    });
    return { ...t, disk };
  }

  it("a node admitted below the floor once kept directories went; refused when none are left", async () => {
    const t = diskSetup();
    for (const [id, n] of [
      ["a1", 300],
      ["a2", 300],
      ["b1", 350],
    ] as const) {
      fs.mkdirSync(path.join(t.dataDir, "tasks", id), { recursive: true });
      t.sizes.set(id, n);
      await t.disk.kept.add(id, id.slice(0, 1));
    }
    // 950 kept: 50 free, below 100.
    assert.equal(await t.disk.forRun("new").admit(), undefined);
    assert.deepEqual(t.present(["a1", "a2", "b1"]), ["a2", "b1"], "a (600) gave back its oldest");
    // Nothing kept to give: the floor refuses.
    for (const id of ["a2", "b1"]) t.disk.kept.forget(id);
    t.sizes.set("a2", 500);
    t.sizes.set("b1", 450);
    const refused = await t.disk.forRun("next").admit();
    assert.match(refused ?? "", /DATA_DIR_FREE_BYTES_MIN/);
    t.disk.close();
  });

  it("a run that ended while a node of it still ran is counted once that node ended", async () => {
    // An aborted run ends without waiting for its nodes (src/flows/executor.ts): its directory
    // is counted as it ends while the killed task may still write.
    const t = diskSetup();
    const run = t.disk.forRun("late");
    assert.equal(await run.admit(), undefined);
    const w = run.watch(() => {});
    fs.mkdirSync(path.join(t.dataDir, "tasks", "late"), { recursive: true });
    t.sizes.set("late", 10);
    await t.disk.kept.add("late", "a");
    t.sizes.set("late", 400); // written after the run's end, before its task died
    assert.equal(await w.end(), undefined);
    assert.equal(t.disk.kept.bytes("a"), 400);
    t.disk.close();
  });

  it("below the floor while a node runs: kept directories go, the running node is not stopped", async () => {
    const t = diskSetup();
    fs.mkdirSync(path.join(t.dataDir, "tasks", "old"), { recursive: true });
    t.sizes.set("old", 500);
    await t.disk.kept.add("old", "a");
    const run = t.disk.forRun("live");
    assert.equal(await run.admit(), undefined);
    const w = run.watch(() => assert.fail("not stopped"));
    fs.mkdirSync(path.join(t.dataDir, "tasks", "live"), { recursive: true });
    t.sizes.set("live", 450); // 50 free
    assert.equal(await w.end(), undefined);
    assert.deepEqual(t.present(["old", "live"]), ["live"]);
    t.disk.close();
  });
});
