/**
 * What the kept directories' accounting holds (kept-dirs.ts): each directory counted, by run and
 * by app, oldest first, and the changes to that count. Nothing here touches the disk but `measure`.
 */
import path from "node:path";
import type { Clock } from "../clock.ts";
import type { FilesRemoved, Run } from "../store/types.ts";
import type { DiskProbe } from "./disk-probe.ts";

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

export interface Entry {
  runId: string;
  app: string;
  bytes: number;
  /** When it became kept: the oldest go first. */
  at: number;
}

/** What one app keeps here, oldest first: a previous life's directories, then this one's. */
export interface AppKept {
  bytes: number;
  /** Counted at start (rebuild), in the order their runs ended. */
  earlier: Map<string, Entry>;
  /** Counted as runs ended here, in that order. */
  later: Map<string, Entry>;
}

export interface State extends KeptDirsDeps {
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

/**
 * The directories of deleted runs: no app is charged for them, yet they hold space. Counted under
 * this key, they are given back first below the floor and bounded like an app's (a tenant that
 * deletes its ended runs before a restart does not take its kept files out of every count).
 */
export const OWNERLESS = "";

/** A run's directory's bytes, as the disk watch counts them (disk-probe.ts). */
export async function measure(s: State, runId: string): Promise<number> {
  s.entryBytes ??= (await s.probe.space(s.dataDir)).entryBytes ?? 0;
  return s.probe.size(path.join(s.root, runId), s.entryBytes);
}

/** Counts a directory for its app, last of its tier: `earlier` for what a previous life kept. */
export function put(s: State, e: Entry, earlier = false): void {
  drop(s, e.runId);
  if (e.bytes === 0) return; // gone meanwhile (or empty): nothing kept
  s.entries.set(e.runId, e);
  const a = s.apps.get(e.app) ?? { bytes: 0, earlier: new Map(), later: new Map() };
  s.apps.set(e.app, a);
  (earlier ? a.earlier : a.later).set(e.runId, e);
  a.bytes += e.bytes;
}

export function drop(s: State, runId: string): void {
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
export function oldestOf(s: State, app: string): Entry | undefined {
  const a = s.apps.get(app);
  if (!a) return undefined;
  for (const tier of [a.earlier, a.later])
    for (const e of tier.values()) if (!s.inUse(e.runId)) return e;
  return undefined;
}
