/**
 * The working directories ended flow runs keep on this node's data directory (`fileCleanup`
 * `keep`, `default`, `days`; docs/security.md, "Disk", "Kept directories"), counted per app:
 * measured once as the run ends, or once its last node here ended when the run ended first (an
 * aborted run does not wait for its nodes' tasks to die), and again for what the
 * directory holds at start. An app's total past SCRIPT_KEPT_BYTES_PER_APP gives back its oldest;
 * below DATA_DIR_FREE_BYTES_MIN they are given back before any script node is refused or stopped:
 * the app keeping the most first, its oldest first. Every removal is Node's (removeTree: no
 * symlink followed), and the run's record says so (`filesRemoved`). A script task's directory
 * and an unfinished run's are not counted; a deleted run's is, at start, as no app's (OWNERLESS).
 */
import { lstat, readdir } from "node:fs/promises";
import path from "node:path";
import type { Clock } from "../clock.ts";
import { removeTree } from "../scripts/safe-tree.ts";
import type { FilesRemoved, Run } from "../store/types.ts";
import { type DiskProbe, UNMEASURABLE } from "./disk-probe.ts";

export interface KeptDirs {
  /**
   * A run ended here and its directory stays: counted for its app, whose oldest go past the bound;
   * while a node of it still runs (an aborted run ends without waiting for it), once that node
   * ended (`settled`). Never throws.
   */
  add(runId: string, app: string): Promise<void>;
  /** The last node of a run that runs here ended: counted now if its run ended meanwhile. */
  settled(runId: string): Promise<void>;
  /** Its directory was removed by another (the file sweeper, retention): no longer counted. */
  forget(runId: string): void;
  /**
   * Below the floor (`floor` bytes, DATA_DIR_FREE_BYTES_MIN): gives back kept directories one at a
   * time until `free()` is not below it, or nothing is left to give; answers how many went.
   */
  giveBack(free: () => Promise<number>, floor: number): Promise<number>;
  /** At start: counts the directories of ended runs the data directory holds. */
  rebuild(): Promise<void>;
  /** Bytes kept by an app (all of its spaces), by every app when absent. */
  bytes(app?: string): number;
  close(): void;
}

export interface KeptDirsDeps {
  dataDir: string;
  /** SCRIPT_KEPT_BYTES_PER_APP; 0: no bound (the floor still gives back). */
  perApp: number;
  clock: Clock;
  probe: DiskProbe;
  runs: {
    getRun(scope: null, id: string): Promise<Run | undefined>;
    markFilesRemoved(id: string, note: FilesRemoved): Promise<void>;
  };
  /** A run whose nodes run here now: its directory is never given back. */
  inUse(runId: string): boolean;
  /**
   * MAX_RUN_S in ms: a directory of no run older than this belongs to no run that can still be
   * running (another process sharing DATA_DIR included), so a rebuild counts it as ownerless.
   */
  orphanAfterMs?: number;
  logger: { error(obj: unknown, msg?: string): void };
}

interface Entry {
  runId: string;
  app: string;
  bytes: number;
  /** When it became kept: the oldest go first. */
  at: number;
}

/** What one app keeps here, oldest first: a previous life's directories, then this one's. */
interface AppKept {
  bytes: number;
  /** Counted at start (rebuild), in the order their runs ended. */
  earlier: Map<string, Entry>;
  /** Counted as runs ended here, in that order. */
  later: Map<string, Entry>;
}

interface State extends KeptDirsDeps {
  root: string;
  entries: Map<string, Entry>;
  apps: Map<string, AppKept>;
  /** The filesystem's bytes per inode (statfs), read once: what each entry of a walk counts. */
  entryBytes: number | undefined;
  /** Runs that ended while a node of theirs still ran: their app, counted once it ended. */
  pending: Map<string, string>;
  /** Every change goes through this chain: measures and removals never interleave. */
  chain: Promise<unknown>;
  closed: boolean;
}

export function createKeptDirs(deps: KeptDirsDeps): KeptDirs {
  const s: State = {
    ...deps,
    root: path.join(deps.dataDir, "tasks"),
    entries: new Map(),
    apps: new Map(),
    entryBytes: undefined,
    pending: new Map(),
    chain: Promise.resolve(),
    closed: false,
  };
  // One change at a time; a failure is logged, never thrown (callers are a run's end and admit).
  const serial = <T>(f: () => Promise<T>, failed: T): Promise<T> => {
    const next = s.chain.then(f).catch((err: unknown) => {
      s.logger.error({ err }, "could not account for kept run directories");
      return failed;
    });
    s.chain = next;
    return next;
  };
  return {
    add: (runId, app) =>
      serial(async () => {
        if (s.inUse(runId)) s.pending.set(runId, app);
        else await count(s, runId, app);
      }, undefined),
    settled: (runId) => {
      const app = s.pending.get(runId);
      if (app === undefined) return Promise.resolve();
      s.pending.delete(runId);
      return serial(() => count(s, runId, app), undefined);
    },
    forget: (runId) => {
      s.pending.delete(runId);
      drop(s, runId);
    },
    giveBack: (free, floor) => serial(() => giveBack(s, free, floor), 0),
    rebuild: () => rebuild(s, serial),
    bytes: (app) =>
      app === undefined
        ? [...s.apps.values()].reduce((n, a) => n + a.bytes, 0)
        : (s.apps.get(app)?.bytes ?? 0),
    close() {
      s.closed = true;
    },
  };
}

async function measure(s: State, runId: string): Promise<number> {
  s.entryBytes ??= (await s.probe.space(s.dataDir)).entryBytes ?? 0;
  return s.probe.size(path.join(s.root, runId), s.entryBytes);
}

/** Measures a run's directory now, counts it for its app, and applies the app's bound. */
async function count(s: State, runId: string, app: string): Promise<void> {
  if (s.closed) return;
  await keep(s, { runId, app, bytes: await measure(s, runId), at: s.clock.now() });
  await bound(s, app);
}

/**
 * Counts a measured directory, or removes it at once when it could not be measured (a tree
 * deeper than the walk goes, disk-probe.ts): it counts as past every bound.
 */
async function keep(s: State, e: Entry, earlier = false): Promise<void> {
  if (Number.isFinite(e.bytes)) return put(s, e, earlier);
  await remove(
    s,
    e,
    `the run's directory nested ${UNMEASURABLE}: it was removed (its artifacts, kept in the database, are not affected)`,
  );
}

/** Counts a directory for its app, last of its tier: `earlier` for what a previous life kept. */
function put(s: State, e: Entry, earlier = false): void {
  drop(s, e.runId);
  if (e.bytes === 0) return; // gone meanwhile (or empty): nothing kept
  s.entries.set(e.runId, e);
  const a = s.apps.get(e.app) ?? { bytes: 0, earlier: new Map(), later: new Map() };
  s.apps.set(e.app, a);
  (earlier ? a.earlier : a.later).set(e.runId, e);
  a.bytes += e.bytes;
}

function drop(s: State, runId: string): void {
  const e = s.entries.get(runId);
  if (!e) return;
  s.entries.delete(runId);
  const a = s.apps.get(e.app);
  if (!a) return;
  a.earlier.delete(runId);
  a.later.delete(runId);
  a.bytes -= e.bytes;
  if (a.earlier.size === 0 && a.later.size === 0) s.apps.delete(e.app);
}

/**
 * The oldest directory an app keeps that no node of its run uses now: the first of its own, in
 * order (not a scan of every app's: this runs at each run's end past the bound).
 */
function oldestOf(s: State, app: string): Entry | undefined {
  const a = s.apps.get(app);
  if (!a) return undefined;
  for (const tier of [a.earlier, a.later])
    for (const e of tier.values()) if (!s.inUse(e.runId)) return e;
  return undefined;
}

/** Removes a kept directory (by Node, no symlink followed) and says so in its run's record. */
async function remove(s: State, e: Entry, reason: string): Promise<void> {
  drop(s, e.runId);
  await removeTree(path.join(s.root, e.runId));
  if (e.app === OWNERLESS) return; // its run is gone: no record to note it in
  await s.runs
    .markFilesRemoved(e.runId, { time: s.clock.now(), reason })
    .catch((err: unknown) =>
      s.logger.error({ err, runId: e.runId }, "could not record a kept directory's removal"),
    );
}

/** An app past SCRIPT_KEPT_BYTES_PER_APP gives back its oldest until it is within it. */
async function bound(s: State, app: string): Promise<void> {
  if (s.perApp <= 0) return;
  for (;;) {
    const held = s.apps.get(app)?.bytes ?? 0;
    if (held <= s.perApp) return;
    const oldest = oldestOf(s, app);
    if (!oldest) return;
    await remove(
      s,
      oldest,
      `the app's kept run directories on this node held ${held} bytes, past ` +
        `SCRIPT_KEPT_BYTES_PER_APP (${s.perApp}): this run's directory, its oldest, was removed ` +
        "(its artifacts, kept in the database, are not affected)",
    );
  }
}

async function giveBack(s: State, free: () => Promise<number>, floor: number): Promise<number> {
  for (let n = 0; ; n++) {
    const bytes = await free();
    if (bytes >= floor) return n;
    // What deleted runs left first, then the app keeping the most (of what may go), its oldest.
    let oldest = oldestOf(s, OWNERLESS);
    let most = 0;
    for (const [app, { bytes: held }] of s.apps) {
      if (oldest?.app === OWNERLESS || held <= most) continue;
      const e = oldestOf(s, app);
      if (e) [oldest, most] = [e, held];
    }
    if (!oldest) return n;
    await remove(
      s,
      oldest,
      `the data directory's filesystem had ${bytes} bytes free, below DATA_DIR_FREE_BYTES_MIN ` +
        `(${floor}): kept run directories were given back, of the app keeping the most on this ` +
        "node its oldest first, and this run's was removed (its artifacts, kept in the database, are not affected)",
    );
  }
}

/**
 * What a previous life kept: each directory of an ended run is counted for its app, oldest by
 * the run's end; an unfinished run's is skipped (it ends here or is recovered), and one of no run
 * (a script task's `u<uid>`, a deleted run's) too. The run records are read first, then each
 * directory is walked as a change of its own, so that giving back below the floor and runs'
 * ends wait for one walk, not for all. The bound then applies to each app.
 */
/**
 * The directories of deleted runs: no app is charged for them, yet they hold space. Counted under
 * this key, they are given back first below the floor and bounded like an app's (a tenant that
 * deletes its ended runs before a restart does not take its kept files out of every count).
 */
const OWNERLESS = "";
const TASK_DIR = /^u\d+$/; // a script task's per-uid directory: its runner empties it

/** When a directory of no run was last changed, if that is older than any run can be. */
async function orphanSince(s: State, name: string): Promise<number | undefined> {
  if (TASK_DIR.test(name) || s.inUse(name)) return undefined;
  const st = await lstat(path.join(s.root, name)).catch(() => undefined);
  if (!st?.isDirectory()) return undefined;
  const old = s.clock.now() - (s.orphanAfterMs ?? Number.POSITIVE_INFINITY);
  return st.mtimeMs < old ? st.mtimeMs : undefined;
}

async function rebuild(
  s: State,
  serial: (f: () => Promise<void>, failed: undefined) => Promise<void>,
): Promise<void> {
  const names = await readdir(s.root).catch(() => [] as string[]);
  const found: Omit<Entry, "bytes">[] = [];
  for (const runId of names) {
    if (s.closed) return;
    try {
      const run = await s.runs.getRun(null, runId);
      if (run && run.endTime !== null) found.push({ runId, app: run.scope.app, at: run.endTime });
      else if (!run) {
        const at = await orphanSince(s, runId);
        if (at !== undefined) found.push({ runId, app: OWNERLESS, at });
      }
    } catch (err) {
      s.logger.error({ err, runId }, "could not count a kept run directory");
    }
  }
  found.sort((a, b) => a.at - b.at);
  for (const f of found)
    await serial(async () => {
      // Counted as it ended here meanwhile (a run recovered at start): that count stands.
      if (s.closed || s.entries.has(f.runId) || s.pending.has(f.runId)) return;
      await keep(s, { ...f, bytes: await measure(s, f.runId) }, true);
    }, undefined);
  const apps = new Set(found.map((f) => f.app));
  await serial(async () => {
    for (const app of apps) if (!s.closed) await bound(s, app);
  }, undefined);
}
