/**
 * What the disk watch reads of the data directory's filesystem (docs/security.md, "Disk"): its
 * free and used space, counting inodes as space (empty files cost no bytes, yet a filesystem out
 * of inodes refuses every new file, the database's and other runs' directories included), a run
 * directory's size, and the space of files a run's processes deleted (or never named: O_TMPFILE)
 * but hold open or mapped, which no walk of the directory sees.
 */
import { readdirSync, readFileSync, readlinkSync, statSync } from "node:fs";
import { lstat, readdir, stat, statfs } from "node:fs/promises";
import path from "node:path";
import { IN_SANDBOX } from "../scripts/python-runner-sandbox.ts";

export interface DiskSpace {
  free: number;
  used: number;
  /** What one inode stands for (the filesystem's bytes per inode); 0: inodes are not counted. */
  entryBytes?: number | undefined;
}

/** The filesystem's state and a directory's size: the real ones, or a test's. */
export interface DiskProbe {
  space(dir: string): Promise<DiskSpace>;
  /** Bytes a directory's entries take on disk (allocated blocks, plus `entryBytes` each); 0 when absent. */
  size(dir: string, entryBytes: number): Promise<number>;
  /** Bytes of deleted files held open or mapped, per directory of `dirs` they were last named in. */
  held?(dataDir: string, dirs: string[]): Promise<Map<string, number>>;
}

export const realProbe: DiskProbe = {
  async space(dir) {
    const s = await statfs(dir);
    const bytes = s.blocks * s.bsize;
    // Filesystems with no fixed inode table (btrfs) report no inodes: not counted there.
    const entryBytes = s.files > 0 ? Math.ceil(bytes / s.files) : 0;
    return {
      free: Math.min(s.bavail * s.bsize, entryBytes > 0 ? s.ffree * entryBytes : Infinity),
      used: (s.blocks - s.bfree) * s.bsize + (s.files - s.ffree) * entryBytes,
      entryBytes,
    };
  },
  size: treeBytes,
  held: heldBytes,
};

/**
 * How deep the walk goes. A path is read from the root each time, and past PATH_MAX (4,096
 * bytes, about 2,000 levels of one-letter names) it cannot be read at all: what is below such a
 * path would count as nothing (docs/security.md, "Disk"). No run needs a tree this deep.
 */
export const MAX_WALK_DEPTH = 256;

/** Why a tree counts as past every bound: the words both the watch and the kept count use. */
export const UNMEASURABLE = `deeper than the disk watch measures (${MAX_WALK_DEPTH} levels, or a path past 4,096 bytes)`;

/**
 * Allocated bytes of a tree (a sparse file counts what it holds) and its entries, symlinks not
 * followed. A tree deeper than MAX_WALK_DEPTH, or with a path too long to read, is Infinity: it
 * cannot be measured, so it counts as past every bound.
 */
async function treeBytes(dir: string, entryBytes: number, depth = 0): Promise<number> {
  if (depth > MAX_WALK_DEPTH) return Number.POSITIVE_INFINITY;
  let names: string[];
  try {
    names = await readdir(dir);
  } catch (err) {
    if (tooLong(err)) return Number.POSITIVE_INFINITY;
    return 0; // gone, or not a directory any more
  }
  let total = 0;
  for (const name of names) {
    const p = path.join(dir, name);
    const st = await lstat(p).catch((err: unknown) => (tooLong(err) ? "too long" : undefined));
    if (st === "too long") return Number.POSITIVE_INFINITY;
    if (!st) continue;
    total += st.blocks * 512 + entryBytes;
    if (st.isDirectory()) total += await treeBytes(p, entryBytes, depth + 1);
  }
  return total;
}

const tooLong = (err: unknown): boolean => (err as NodeJS.ErrnoException).code === "ENAMETOOLONG";

/**
 * Every process's descriptors and mappings of deleted files on the data directory's filesystem,
 * by the run directory they were last named in: as the host sees it, or as a task in the sandbox
 * sees it (`/tasks/<runId>`). A task can name files on that filesystem only in its run's directory.
 * Synchronous: some thousand syscalls, a few milliseconds, where one await each would take tens.
 */
async function heldBytes(dataDir: string, dirs: string[]): Promise<Map<string, number>> {
  const out = new Map<string, number>();
  if (dirs.length === 0) return out;
  const dev = (await stat(dataDir)).dev;
  const prefixes = dirs.map((dir) => ({
    dir,
    at: [`${dir}/`, `${IN_SANDBOX.tasks}/${path.basename(dir)}/`],
  }));
  const seen = new Set<number>();
  const count = (named: string, statPath: string) => {
    if (!named.endsWith(" (deleted)")) return;
    const owner = prefixes.find((p) => p.at.some((at) => named.startsWith(at)));
    if (!owner) return;
    const st = statSync(statPath, { throwIfNoEntry: false });
    if (!st || st.dev !== dev || st.nlink > 0 || seen.has(st.ino)) return;
    seen.add(st.ino);
    out.set(owner.dir, (out.get(owner.dir) ?? 0) + st.blocks * 512);
  };
  const tryOr = <T>(f: () => T, fallback: T): T => {
    try {
      return f();
    } catch {
      return fallback; // the process ended meanwhile, or is not ours to read
    }
  };
  // Not the service's own process (its descriptors are its store's).
  const pids = tryOr(() => readdirSync("/proc"), []).filter(
    (n) => /^\d+$/.test(n) && Number(n) !== process.pid,
  );
  for (const pid of pids) {
    for (const fd of tryOr(() => readdirSync(`/proc/${pid}/fd`), [])) {
      const at = `/proc/${pid}/fd/${fd}`;
      tryOr(() => count(readlinkSync(at), at), undefined);
    }
    // A mapping outlives its descriptor: open, unlink, mmap, close.
    for (const line of tryOr(() => readFileSync(`/proc/${pid}/maps`, "utf8"), "").split("\n")) {
      if (!line.endsWith(" (deleted)")) continue;
      const m = /^([0-9a-f]+-[0-9a-f]+)\s+\S+\s+\S+\s+\S+\s+\d+\s+(\/.*)$/.exec(line);
      if (m?.[1] && m[2])
        tryOr(() => count(m[2] ?? "", `/proc/${pid}/map_files/${m[1]}`), undefined);
    }
  }
  return out;
}
