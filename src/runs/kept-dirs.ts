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
import path from "node:path";
import { count, giveBack } from "./kept-dirs-bounds.ts";
import { rebuild } from "./kept-dirs-rebuild.ts";
import { drop, type KeptDirsDeps, type State } from "./kept-dirs-state.ts";

export type { KeptDirsDeps } from "./kept-dirs-state.ts";

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
