/**
 * The checks of the data directory's disk (docs/security.md, "Disk"): the filesystem's space, the
 * walks of running runs' directories, and which run is stopped; run-disk.ts hands them the runs.
 */
import type { Clock, TimerHandle } from "../clock.ts";
import { type DiskProbe, type DiskSpace, UNMEASURABLE } from "./disk-probe.ts";
import type { KeptDirs } from "./kept-dirs.ts";

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

export interface RunState {
  runId: string;
  dir: string;
  /** Bytes at the last walk; undefined: not known (walked at the next check). */
  known: number | undefined;
  /** The filesystem's used bytes at that walk (or when the run was known empty). */
  usedAt: number;
  stops: Set<() => void>;
  stopped: string | undefined;
}

export interface Disk {
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

export const isLow = (d: Disk, free: number) =>
  d.config.freeBytesMin > 0 && free < d.config.freeBytesMin;

/** The filesystem's space: read now when `fresh`, else at most DATA_DIR_CHECK_MS old. */
export async function space(d: Disk, fresh: boolean): Promise<DiskSpace> {
  const now = d.clock.now();
  if (!fresh && d.last && now - d.last.at < d.config.checkMs) return d.last;
  const s = await d.probe.space(d.config.dataDir);
  d.last = { ...s, at: now };
  return s;
}

export function floorMessage(d: Disk, free: number): string {
  return (
    `the data directory's filesystem has ${free} bytes free, below DATA_DIR_FREE_BYTES_MIN ` +
    `(${d.config.freeBytesMin}): script nodes do not run until space is freed`
  );
}

export function arm(d: Disk): void {
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
export async function check(d: Disk, only?: RunState): Promise<void> {
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
const unmeasurable = `the run's working directory nests ${UNMEASURABLE}: the node was stopped and the run's files removed`;

/** Below the floor, what ended runs keep goes first (kept-dirs.ts); answers the space then. */
export async function giveBackKept(d: Disk, s: DiskSpace): Promise<DiskSpace> {
  if (d.kept.bytes() === 0) return s;
  await d.kept.giveBack(async () => (await space(d, true)).free, d.config.freeBytesMin);
  return space(d, true);
}

function stopRun(r: RunState, why: string): void {
  r.stopped = why;
  for (const stop of r.stops) stop();
}
