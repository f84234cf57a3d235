/**
 * How kept directories are given back (kept-dirs.ts): an app past SCRIPT_KEPT_BYTES_PER_APP its
 * oldest, below DATA_DIR_FREE_BYTES_MIN the app keeping the most its oldest; each removal by Node
 * (no symlink followed) and said in the run's record.
 */
import path from "node:path";
import { removeTree } from "../scripts/safe-tree.ts";
import { UNMEASURABLE } from "./disk-probe.ts";
import {
  drop,
  type Entry,
  measure,
  OWNERLESS,
  oldestOf,
  put,
  type State,
} from "./kept-dirs-state.ts";

/** Measures a run's directory now, counts it for its app, and applies the app's bound. */
export async function count(s: State, runId: string, app: string): Promise<void> {
  if (s.closed) return;
  await keep(s, { runId, app, bytes: await measure(s, runId), at: s.clock.now() });
  await bound(s, app);
}

/**
 * Counts a measured directory, or removes it at once when it could not be measured (a tree
 * deeper than the walk goes, disk-probe.ts): it counts as past every bound.
 */
export async function keep(s: State, e: Entry, earlier = false): Promise<void> {
  if (Number.isFinite(e.bytes)) return put(s, e, earlier);
  await remove(
    s,
    e,
    `the run's directory nested ${UNMEASURABLE}: it was removed (its artifacts, kept in the database, are not affected)`,
  );
}

/**
 * Removes a kept directory (by Node, no symlink followed), said in its run's record first: a
 * process killed in between leaves the note and the files, which the next start counts and gives
 * back again, never files gone without a word. A note that cannot be written is logged, and the
 * directory goes all the same (the bound and the disk's floor come first).
 */
async function remove(s: State, e: Entry, reason: string): Promise<void> {
  drop(s, e.runId);
  if (e.app !== OWNERLESS)
    // (an ownerless directory's run is gone: no record to note it in)
    await s.runs
      .markFilesRemoved(e.runId, { time: s.clock.now(), reason })
      .catch((err: unknown) =>
        s.logger.error({ err, runId: e.runId }, "could not record a kept directory's removal"),
      );
  await removeTree(path.join(s.root, e.runId));
}

/** An app past SCRIPT_KEPT_BYTES_PER_APP gives back its oldest until it is within it. */
export async function bound(s: State, app: string): Promise<void> {
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

export async function giveBack(
  s: State,
  free: () => Promise<number>,
  floor: number,
): Promise<number> {
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
