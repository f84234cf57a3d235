import { randomUUID } from "node:crypto";
import { constants, type Stats } from "node:fs";
import {
  type FileHandle,
  lchown,
  lstat,
  open,
  readdir,
  rename,
  rmdir,
  unlink,
} from "node:fs/promises";

/**
 * Walks of a directory tree that processes of the sandbox may still be changing while Node, root,
 * walks it (a preloading zygote can keep a descriptor inside a run's directory; docs/security.md,
 * "Preloading"). A walk by path follows a subdirectory swapped for a symlink between two calls and
 * goes on in a host directory; here each directory is opened without following a symlink and its
 * entries are reached through `/proc/self/fd/N/<name>`, which resolves to that very directory,
 * and no call follows a last component.
 */

const NOT_A_DIR = new Set(["ELOOP", "ENOTDIR", "ENOENT"]);

/** The directory at `p` (never a symlink there), or undefined when it is not one any more. */
async function openDir(p: string): Promise<FileHandle | undefined> {
  try {
    return await open(p, constants.O_RDONLY | constants.O_DIRECTORY | constants.O_NOFOLLOW);
  } catch (err) {
    if (NOT_A_DIR.has((err as NodeJS.ErrnoException).code ?? "")) return undefined;
    throw err;
  }
}

const isGone = (err: unknown): boolean => (err as NodeJS.ErrnoException).code === "ENOENT";

/** Swallows "it is gone already" (an entry removed meanwhile): nothing left to change. */
const unlessGone = (err: unknown): Promise<undefined> =>
  isGone(err) ? Promise.resolve(undefined) : Promise.reject(err);

/** Each entry of the open directory `fh`, by a path through its descriptor, with its lstat. */
async function eachEntry(
  fh: FileHandle,
  fn: (p: string, e: Stats) => Promise<unknown>,
): Promise<void> {
  const base = `/proc/self/fd/${fh.fd}`;
  for (const name of await readdir(base)) {
    const p = `${base}/${name}`;
    const e = await lstat(p).catch(unlessGone);
    if (e) await fn(p, e);
  }
}

/** A directory of a walk: who it is, and its subdirectories still to visit. */
interface Level {
  dev: number;
  ino: number;
  subdirs: string[];
}

/**
 * Gives every file of a directory to `gid`, owners unchanged. Holds two descriptors whatever the
 * depth (one per level ran the service out of them, at every script node's start of a run whose
 * kept directory nested deep enough; docs/security.md, "Disk"): it goes down into a subdirectory
 * and back up through `..`, and a parent that is not the directory it came from (the tree was
 * moved under it) ends the walk, changing nothing more.
 */
export async function chgrpTree(dir: string, gid: number): Promise<void> {
  let fh = await openDir(dir);
  const levels: Level[] = [];
  try {
    if (fh) levels.push(await handOver(fh, gid));
    while (fh) {
      const next = levels.at(-1)?.subdirs.pop();
      if (next !== undefined) {
        const child = await openDir(`/proc/self/fd/${fh.fd}/${next}`);
        if (!child) continue; // swapped for something else under us: nothing of it is ours
        await fh.close();
        fh = child;
        levels.push(await handOver(fh, gid));
        continue;
      }
      levels.pop();
      const parent = levels.at(-1);
      if (!parent) break;
      const up = await openDir(`/proc/self/fd/${fh.fd}/..`);
      await fh.close();
      fh = up;
      const st = await up?.stat();
      if (st?.dev !== parent.dev || st.ino !== parent.ino) break;
    }
  } finally {
    await fh?.close();
  }
}

/** Gives the open directory and its files to `gid`; its subdirectories are the walk's to enter. */
async function handOver(fh: FileHandle, gid: number): Promise<Level> {
  const st = await fh.stat();
  await fh.chown(st.uid, gid);
  const subdirs: string[] = [];
  await eachEntry(fh, async (p, e) => {
    if (e.isDirectory()) subdirs.push(p.slice(p.lastIndexOf("/") + 1));
    else await lchown(p, e.uid, gid).catch(unlessGone);
  });
  return { dev: st.dev, ino: st.ino, subdirs };
}

/**
 * Removes a directory and everything in it, holding two descriptors whatever its depth (a task can
 * nest directories far deeper than the service may open: a descriptor per level ran out of them,
 * left the tree for ever and took every descriptor of the service meanwhile). Each directory of
 * the tree is emptied of its files and its subdirectories move up into the top one, under a new
 * random name, to be emptied in turn: nothing is ever deeper than one level below the top.
 * A rename never follows its last components, and both ends are reached through descriptors of
 * directories of the tree, so nothing leaves it (docs/security.md, "Disk").
 */
export async function removeTree(dir: string): Promise<void> {
  const top = await openDir(dir);
  if (!top) {
    await unlink(dir).catch(unlessGone);
    return;
  }
  try {
    const base = `/proc/self/fd/${top.fd}`;
    const pending = await readdir(base);
    for (let name = pending.pop(); name !== undefined; name = pending.pop())
      await removeEntry(base, name, pending);
  } finally {
    await top.close();
  }
  await rmdir(dir).catch(unlessGone);
}

/**
 * Removes the entry `name` of the top directory (`base`): a file, or a directory emptied of its
 * files whose subdirectories move up into the top one (their new names onto `pending`).
 */
async function removeEntry(base: string, name: string, pending: string[]): Promise<void> {
  const p = `${base}/${name}`;
  const e = await lstat(p).catch(unlessGone);
  if (!e) return;
  // Not a directory, or swapped for something else under us: a name to remove, nothing to enter.
  const fh = e.isDirectory() ? await openDir(p) : undefined;
  if (!fh) {
    await unlink(p).catch(unlessGone);
    return;
  }
  try {
    await eachEntry(fh, async (q, sub) => {
      if (!sub.isDirectory()) return unlink(q).catch(unlessGone);
      // A random name: the tree's processes cannot have taken it (a rename replaces a file or
      // an empty directory of that name: inside the tree too, and removed anyway).
      const up = `.sluice-removing-${randomUUID()}`;
      await rename(q, `${base}/${up}`).then(() => pending.push(up), unlessGone);
    });
  } finally {
    await fh.close();
  }
  await rmdir(p).catch(unlessGone);
}
