/**
 * At start, the kept directories a previous life left (kept-dirs.ts): counted for their apps,
 * or as no app's (OWNERLESS) when their run was deleted.
 */
import { lstat, readdir } from "node:fs/promises";
import path from "node:path";
import { removeTree } from "../scripts/safe-tree.ts";
import { bound, keep } from "./kept-dirs-bounds.ts";
import { type Entry, measure, OWNERLESS, type State } from "./kept-dirs-state.ts";

const TASK_DIR = /^u\d+$/; // a script task's per-uid directory: its runner empties it

/** When a directory of no run was last changed, if that is older than any run can be. */
async function orphanSince(s: State, name: string): Promise<number | undefined> {
  if (TASK_DIR.test(name) || s.inUse(name)) return undefined;
  const st = await lstat(path.join(s.root, name)).catch(() => undefined);
  if (!st?.isDirectory()) return undefined;
  const old = s.clock.now() - (s.orphanAfterMs ?? Number.POSITIVE_INFINITY);
  return st.mtimeMs < old ? st.mtimeMs : undefined;
}

/**
 * What a previous life kept: each directory of an ended run is counted for its app, oldest by
 * the run's end; an unfinished run's is skipped (it ends here or is recovered), and one of no run
 * (a script task's `u<uid>`, a deleted run's) too. The run records are read first, then each
 * directory is walked as a change of its own, so that giving back below the floor and runs'
 * ends wait for one walk, not for all. The bound then applies to each app.
 */
export async function rebuild(
  s: State,
  serial: (f: () => Promise<void>, failed: undefined) => Promise<void>,
): Promise<void> {
  const names = await readdir(s.root).catch(() => [] as string[]);
  const found: Omit<Entry, "bytes">[] = [];
  /** Removals noted in their run's record and cut off before the directory went (kept-dirs-bounds). */
  const noted: string[] = [];
  for (const runId of names) {
    if (s.closed) return;
    try {
      const run = await s.runs.getRun(null, runId);
      if (run?.filesRemoved) noted.push(runId);
      else if (run && run.endTime !== null)
        found.push({ runId, app: run.scope.app, at: run.endTime });
      else if (!run) {
        const at = await orphanSince(s, runId);
        if (at !== undefined) found.push({ runId, app: OWNERLESS, at });
      }
    } catch (err) {
      s.logger.error({ err, runId }, "could not count a kept run directory");
    }
  }
  for (const runId of noted)
    await serial(async () => {
      if (!s.closed) await removeTree(path.join(s.root, runId));
    }, undefined);
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
