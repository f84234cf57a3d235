/**
 * `fileCleanup` (docs/flow-graph.md): each flow run's working directory is `<DATA_DIR>/tasks/<runId>`,
 * shared by its script nodes. `afterRun` deletes it as the run ends; `default` and `days` leave it
 * to the background sweeper, which deletes it once the retention since the run's end has passed;
 * `keep` keeps it. The sweeper also removes directories whose run was deleted (after the default
 * retention, counted from the directory's last change) and error-handler results of deleted runs.
 */
import { readdir, rmdir, stat } from "node:fs/promises";
import path from "node:path";
import { LRUCache } from "lru-cache";
import type { Clock, TimerHandle } from "../clock.ts";
import { type FileCleanup, normalizeConfigure } from "../flows/graph.ts";
import { removeTree } from "../scripts/safe-tree.ts";
import type { Run, Store } from "../store/types.ts";

const DAY_MS = 86_400_000;

export interface FileCleanupConfig {
  dataDir: string;
  /** Retention of `{type: "default"}` (FILE_RETENTION_DAYS). */
  fileRetentionDays: number;
  /** Sweeper period (FILE_SWEEP_MS); 0 disables the timer (sweep() still works). */
  fileSweepMs: number;
}

export const workDirOf = (dataDir: string, runId: string) => path.join(dataDir, "tasks", runId);

/** How long after the run's end its files stay; null: kept for good. */
export function retentionMs(policy: FileCleanup, defaultDays: number): number | null {
  switch (policy.type) {
    case "keep":
      return null;
    case "afterRun":
      return 0;
    case "days":
      return policy.days * DAY_MS;
    default:
      return defaultDays * DAY_MS;
  }
}

/** Called as a run ends: only `afterRun` deletes at once. Answers whether the directory stays. Never throws. */
export async function cleanupAtRunEnd(
  dataDir: string,
  runId: string,
  policy: FileCleanup,
): Promise<boolean> {
  const dir = workDirOf(dataDir, runId);
  if (policy.type !== "afterRun") {
    // Nothing written means nothing to keep: an empty (or absent) directory goes now, whatever
    // the policy, so the sweeper is not left millions of empty folders.
    return rmdir(dir).then(
      () => false,
      (err: NodeJS.ErrnoException) => err.code !== "ENOENT",
    );
  }
  // Never by path: a process may still hold a descriptor inside (docs/security.md, "Disk").
  await removeTree(dir).catch(() => {});
  return false;
}

export interface FileSweeper {
  /** One pass; returns the run IDs whose directories were deleted. */
  sweep(): Promise<string[]>;
  start(): void;
  stop(): Promise<void>;
}

interface SweeperDeps {
  store: Store;
  clock: Clock;
  logger: { error(obj: unknown, msg?: string): void };
  config: FileCleanupConfig;
  /** Told of each run directory removed (the count of what ended runs keep, kept-dirs.ts). */
  onRemoved?: ((runId: string) => void) | undefined;
}

/** The state of a sweeper: its timer, the pass under way, and the policies it has read. */
interface Sweeper extends SweeperDeps {
  root: string;
  /** A revision's configuration never changes: its policy is read once. */
  policies: LRUCache<string, FileCleanup>;
  timer: TimerHandle | undefined;
  running: Promise<unknown>;
  stopped: boolean;
}

export function createFileSweeper(deps: SweeperDeps): FileSweeper {
  const w: Sweeper = {
    ...deps,
    root: path.join(deps.config.dataDir, "tasks"),
    policies: new LRUCache({ max: 10_000 }),
    timer: undefined,
    running: Promise.resolve(),
    stopped: false,
  };
  return {
    sweep: () => sweep(w),
    start: () => schedule(w, Math.min(w.config.fileSweepMs, 10_000)),
    async stop() {
      w.stopped = true;
      if (w.timer) w.clock.clearTimeout(w.timer);
      await w.running;
    },
  };
}

async function policyOf(w: Sweeper, run: Run): Promise<FileCleanup> {
  // Script tasks (PY) clean their own directories; a leftover one gets the default.
  if (run.elementType !== "DPL" || run.version === null) return { type: "default" };
  const key = `${run.elementId}:${run.version}`;
  let p = w.policies.get(key);
  if (!p) {
    const rev = await w.store.flowRevision(run.elementId, Number(run.version));
    // A revision LIMIT_REVISIONS_PER_FLOW removed leaves the policy unknown: kept until the run
    // is deleted, never sooner than its flow said (docs/error-handlers.md, "fileCleanup").
    p = rev ? normalizeConfigure(rev.configure).fileCleanup : { type: "keep" };
    w.policies.set(key, p);
  }
  return p;
}

/** When this directory may go (epoch ms), or null: not (yet) decidable or kept. */
async function deadline(w: Sweeper, name: string, dir: string): Promise<number | null> {
  const run = await w.store.getRun(null, name);
  if (run) {
    if (run.endTime === null) return null; // still running
    const keep = retentionMs(await policyOf(w, run), w.config.fileRetentionDays);
    return keep === null ? null : run.endTime + keep;
  }
  const st = await stat(dir);
  return st.mtimeMs + w.config.fileRetentionDays * DAY_MS;
}

async function sweep(w: Sweeper): Promise<string[]> {
  let names: string[];
  try {
    names = await readdir(w.root);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === "ENOENT") return [];
    throw err;
  }
  const deleted: string[] = [];
  const now = w.clock.now();
  for (const name of names) {
    const dir = path.join(w.root, name);
    try {
      const due = await deadline(w, name, dir);
      if (due === null || due > now) continue;
      await removeTree(dir);
      w.onRemoved?.(name);
      deleted.push(name);
    } catch (err) {
      w.logger.error({ err, dir }, "file cleanup failed for a run directory");
    }
  }
  await w.store.pruneErrorHandlerResults();
  return deleted;
}

function schedule(w: Sweeper, delay: number): void {
  if (w.stopped || w.config.fileSweepMs <= 0) return;
  w.timer = w.clock.setTimeout(() => {
    w.running = sweep(w)
      .catch((err: unknown) => w.logger.error({ err }, "file sweep failed"))
      .finally(() => schedule(w, w.config.fileSweepMs));
  }, delay);
  w.timer.unref?.();
}
