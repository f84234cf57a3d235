/**
 * The data directory's disk, watched from Node while flow runs' script nodes run (docs/security.md,
 * "Disk"): a run's shared working directory (`DATA_DIR/tasks/<runId>`) lives on the filesystem that
 * also holds the database. A run whose directory passes SCRIPT_RUN_DISK_BYTES, or the largest one
 * while the filesystem's free space is below DATA_DIR_FREE_BYTES_MIN, is stopped: its tasks are
 * killed, its node fails naming the setting, its files are removed. Below the floor, no script
 * node starts. Checks: every DATA_DIR_CHECK_MS while a node runs, and once as each node ends.
 * The directories ended runs keep are counted per app (kept-dirs.ts): below the floor they are
 * given back before any script node is refused or stopped.
 *
 * Inodes count as space, and deleted files a run's processes hold open count to the run. Cost: a
 * statfs per check. A directory is walked only when the filesystem's growth since its last walk
 * could have taken it past its budget, when space was freed since (the growth then hides what it
 * wrote), or below the floor; a run that does not write much is never walked; a walk that does not
 * pass the budget is followed by one look at every process's open and mapped deleted files.
 */
import { lstat, readdir } from "node:fs/promises";
import path from "node:path";
import type { Clock, TimerHandle } from "../clock.ts";
import { removeTree } from "../scripts/safe-tree.ts";
import { type DiskProbe, type DiskSpace, MAX_WALK_DEPTH, realProbe } from "./disk-probe.ts";
import { workDirOf } from "./file-cleanup.ts";
import { createKeptDirs, type KeptDirs, type KeptDirsDeps } from "./kept-dirs.ts";

export type { DiskProbe } from "./disk-probe.ts";

export interface DataDiskConfig {
  dataDir: string;
  /** SCRIPT_RUN_DISK_BYTES: what a flow run's directory may hold; 0: no budget. */
  runBytes: number;
  /** DATA_DIR_FREE_BYTES_MIN: the free space below which script nodes stop; 0: no floor. */
  freeBytesMin: number;
  /** DATA_DIR_CHECK_MS: how often a running node's run is checked. */
  checkMs: number;
  /** SCRIPT_KEPT_BYTES_PER_APP: what an app's ended runs may keep here; 0: no bound. */
  keptBytesPerApp: number;
  /** MAX_RUN_S in ms: a directory of no run this old is a deleted run's (kept-dirs.ts). */
  orphanAfterMs?: number;
}

export interface DiskState {
  freeBytes: number;
  /** Below DATA_DIR_FREE_BYTES_MIN: script nodes are refused. */
  low: boolean;
}

/** One flow run's directory, as its script nodes use it. */
export interface RunDisk {
  /** Before a node starts: why it must not (the floor, or its run was stopped); else undefined. */
  admit(): Promise<string | undefined>;
  /** While a node's task runs; `stop` kills it. `end` once it ended: why it was stopped, if it was. */
  watch(stop: () => void): { end(): Promise<string | undefined> };
  /** Why the run was stopped, if it was: its files are not kept. */
  readonly stopped: string | undefined;
}

export interface DataDisk {
  forRun(runId: string): RunDisk;
  /** The directories ended runs keep here, per app. */
  kept: KeptDirs;
  /** The free space, read at most DATA_DIR_CHECK_MS ago (for /health). */
  state(): Promise<DiskState>;
  close(): void;
}

interface RunState {
  runId: string;
  dir: string;
  /** Bytes at the last walk; undefined: not known (walked at the next check). */
  known: number | undefined;
  /** The filesystem's used bytes at that walk (or when the run was known empty). */
  usedAt: number;
  stops: Set<() => void>;
  stopped: string | undefined;
}

interface Disk {
  config: DataDiskConfig;
  clock: Clock;
  probe: DiskProbe;
  logger: { error(obj: unknown, msg?: string): void };
  kept: KeptDirs;
  active: Set<RunState>;
  last: (DiskSpace & { at: number }) | undefined;
  timer: TimerHandle | undefined;
  /** The check under way: checks never overlap. */
  checking: Promise<void> | undefined;
}

export function createDataDisk(deps: {
  config: DataDiskConfig;
  clock: Clock;
  logger: { error(obj: unknown, msg?: string): void };
  /** Run records: a kept directory's app, and the note of its removal. */
  runs: KeptDirsDeps["runs"];
  probe?: DiskProbe;
}): DataDisk {
  const { config, clock, logger, runs } = deps;
  const probe = deps.probe ?? realProbe;
  const active = new Set<RunState>();
  const inUse = (id: string) => [...active].some((r) => r.runId === id);
  const perApp = config.keptBytesPerApp;
  const kept = createKeptDirs({ ...config, perApp, clock, probe, runs, logger, inUse });
  const d: Disk = {
    config,
    clock,
    logger,
    probe,
    kept,
    active,
    last: undefined,
    timer: undefined,
    checking: undefined,
  };
  return {
    forRun: (runId) => runDisk(d, runId),
    kept,
    async state() {
      const s = await space(d, false);
      return { freeBytes: s.free, low: isLow(d, s.free) };
    },
    close() {
      if (d.timer) d.clock.clearTimeout(d.timer);
      d.timer = undefined;
      d.active.clear();
      kept.close();
    },
  };
}

const isLow = (d: Disk, free: number) => d.config.freeBytesMin > 0 && free < d.config.freeBytesMin;

/** The filesystem's space: read now when `fresh`, else at most DATA_DIR_CHECK_MS old. */
async function space(d: Disk, fresh: boolean): Promise<DiskSpace> {
  const now = d.clock.now();
  if (!fresh && d.last && now - d.last.at < d.config.checkMs) return d.last;
  const s = await d.probe.space(d.config.dataDir);
  d.last = { ...s, at: now };
  return s;
}

function floorMessage(d: Disk, free: number): string {
  return (
    `the data directory's filesystem has ${free} bytes free, below DATA_DIR_FREE_BYTES_MIN ` +
    `(${d.config.freeBytesMin}): script nodes do not run until space is freed`
  );
}

function runDisk(d: Disk, runId: string): RunDisk {
  const dir = workDirOf(d.config.dataDir, runId);
  const r: RunState = {
    runId,
    dir,
    known: undefined,
    usedAt: 0,
    stops: new Set(),
    stopped: undefined,
  };
  let first = true;
  return {
    get stopped() {
      return r.stopped;
    },
    async admit() {
      if (r.stopped) return r.stopped;
      const s = await space(d, first);
      if (first) {
        first = false;
        // A new run's directory does not exist yet: known empty, at no walk's cost.
        const exists = await lstat(dir).then(
          () => true,
          () => false,
        );
        if (!exists) {
          r.known = 0;
          r.usedAt = s.used;
        }
      }
      if (!isLow(d, s.free)) return undefined;
      const now = await giveBackKept(d, s);
      return isLow(d, now.free) ? floorMessage(d, now.free) : undefined;
    },
    watch(stop) {
      r.stops.add(stop);
      if (r.stopped) stop(); // stopped between its admit and now
      d.active.add(r);
      arm(d);
      let ended: Promise<string | undefined> | undefined;
      const end = async () => {
        if (!r.stopped) await check(d, r);
        r.stops.delete(stop);
        if (r.stops.size > 0) return r.stopped;
        // Its last node ended: a stopped run's files go before it leaves the checks, so that no
        // other run is stopped for the floor meanwhile.
        if (r.stopped) await removeFiles(d, r);
        d.active.delete(r);
        if (d.active.size === 0 && d.timer) {
          d.clock.clearTimeout(d.timer); // no node runs: nothing to check
          d.timer = undefined;
        }
        // The run ended before this node (it was aborted): its directory is counted now.
        await d.kept.settled(r.runId);
        return r.stopped;
      };
      // Idempotent: a caller's finally may end it again.
      return { end: () => (ended ??= end()) };
    },
  };
}

function arm(d: Disk): void {
  if (d.timer || d.active.size === 0) return;
  d.timer = d.clock.setTimeout(() => {
    d.timer = undefined;
    void check(d).finally(() => arm(d));
  }, d.config.checkMs);
  d.timer.unref?.();
}

/**
 * One check of every run with a node running, or at a node's end of its own run only (each run's
 * end frees space, so under load a check of all would walk every run's directory at every node's
 * end); a check already under way is joined (then one more).
 */
async function check(d: Disk, only?: RunState): Promise<void> {
  while (d.checking) await d.checking;
  d.checking = checkOnce(d, only)
    .catch((err: unknown) => d.logger.error({ err }, "could not check the data directory's disk"))
    .finally(() => {
      d.checking = undefined;
    });
  await d.checking;
}

async function checkOnce(d: Disk, only?: RunState): Promise<void> {
  if (d.active.size === 0) return;
  let s = await space(d, true);
  // Below the floor, what ended runs keep goes before any running node is stopped.
  if (isLow(d, s.free)) s = await giveBackKept(d, s);
  const low = isLow(d, s.free);
  // Below the floor every run is looked at, to stop the one holding the most.
  const runs = only && !low ? [only] : [...d.active];
  const budget = d.config.runBytes;
  // Runs the filesystem's growth could have taken past the budget: walked, and what their files
  // do not explain is looked for among deleted files held open.
  const grown = (r: RunState) =>
    budget > 0 &&
    r.known !== undefined &&
    s.used >= r.usedAt &&
    r.known + (s.used - r.usedAt) > budget;
  const suspects = new Set(runs.filter((r) => !r.stopped && (low || grown(r))));
  const walk = runs.filter(
    (r) =>
      !r.stopped &&
      (suspects.has(r) || (budget > 0 && (r.known === undefined || s.used < r.usedAt))),
  );
  const over = (r: RunState) => {
    if (r.known === Number.POSITIVE_INFINITY) stopRun(r, unmeasurable);
    else if (budget > 0 && (r.known ?? 0) > budget)
      stopRun(
        r,
        `the run's working directory holds ${r.known} bytes, past SCRIPT_RUN_DISK_BYTES ` +
          `(${budget}): the node was stopped and the run's files removed`,
      );
  };
  for (const r of walk) {
    r.known = await d.probe.size(r.dir, s.entryBytes ?? 0);
    r.usedAt = s.used;
    over(r);
  }
  // What its files do not explain may be deleted files its tasks hold open: one look at every
  // process for all the suspects. Only for them: a walk because space was freed elsewhere (other
  // runs' files removed, at every run's end under load) is cheap, the look at every process is
  // not (about 4 ms on the event loop, and a run-sync of a script node at 8 callers lost half its
  // rate when every walk was followed by one).
  const unexplained = walk.filter((r) => !r.stopped && suspects.has(r));
  const held =
    unexplained.length > 0
      ? await d.probe.held?.(
          d.config.dataDir,
          unexplained.map((r) => r.dir),
        )
      : undefined;
  for (const r of unexplained) {
    const bytes = held?.get(r.dir) ?? 0;
    if (bytes === 0) continue;
    r.known = (r.known ?? 0) + bytes;
    over(r);
  }
  if (!low) return;
  // Below the floor: the run holding the most is stopped, one at a time: none more while one
  // stopped has not yet ended and had its files removed (what that frees may be enough).
  let largest: RunState | undefined;
  for (const r of d.active) {
    if (r.stopped) return;
    if ((r.known ?? 0) > (largest?.known ?? 0)) largest = r;
  }
  if (largest)
    stopRun(
      largest,
      `${floorMessage(d, s.free)}; this run's directory held the most (${largest.known} bytes): ` +
        "the node was stopped and the run's files removed",
    );
}

/** A tree the walk cannot measure (disk-probe.ts) counts as past every bound. */
const unmeasurable =
  `the run's working directory nests deeper than the disk watch measures (${MAX_WALK_DEPTH} ` +
  "levels, or a path past 4,096 bytes): the node was stopped and the run's files removed";

/** Below the floor, what ended runs keep goes first (kept-dirs.ts); answers the space then. */
async function giveBackKept(d: Disk, s: DiskSpace): Promise<DiskSpace> {
  if (d.kept.bytes() === 0) return s;
  await d.kept.giveBack(async () => (await space(d, true)).free, d.config.freeBytesMin);
  return space(d, true);
}

function stopRun(r: RunState, why: string): void {
  r.stopped = why;
  for (const stop of r.stops) stop();
}

/** Once the run's tasks ended: what its directory holds goes (the directory stays, the runner's). */
async function removeFiles(d: Disk, r: RunState): Promise<void> {
  try {
    const names = await readdir(r.dir).catch(() => [] as string[]);
    for (const name of names) await removeTree(path.join(r.dir, name));
    r.known = 0;
  } catch (err) {
    d.logger.error({ err, dir: r.dir }, "could not remove a stopped run's files");
  }
}
