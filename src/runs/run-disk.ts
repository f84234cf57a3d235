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
import type { Clock } from "../clock.ts";
import { removeTree } from "../scripts/safe-tree.ts";
import { type DiskProbe, realProbe } from "./disk-probe.ts";
import { workDirOf } from "./file-cleanup.ts";
import { createKeptDirs, type KeptDirs, type KeptDirsDeps } from "./kept-dirs.ts";
import {
  arm,
  check,
  type DataDiskConfig,
  type Disk,
  floorMessage,
  giveBackKept,
  isLow,
  type RunState,
  space,
} from "./run-disk-check.ts";

export type { DiskProbe } from "./disk-probe.ts";

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
