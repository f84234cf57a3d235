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

/** Gives every file of a directory to `gid`, owners unchanged. */
export async function chgrpTree(dir: string, gid: number): Promise<void> {
  const fh = await openDir(dir);
  if (!fh) return; // swapped for something else under us: nothing of it is ours to change
  try {
    const st = await fh.stat();
    await fh.chown(st.uid, gid);
    await eachEntry(fh, (p, e) =>
      e.isDirectory() ? chgrpTree(p, gid) : lchown(p, e.uid, gid).catch(unlessGone),
    );
  } finally {
    await fh.close();
  }
}

/**
 * How deep removeTree descends before it cuts: each level holds a descriptor, and a task can nest
 * directories far deeper than the service has descriptors (docs/security.md, "Disk").
 */
const CUT_DEPTH = 64;

/**
 * Removes a directory and everything in it. A subdirectory CUT_DEPTH levels down is moved up into
 * the directory being removed (a rename, which follows no last component) and removed in a later
 * pass, so at most CUT_DEPTH descriptors are open whatever the tree's depth.
 */
export async function removeTree(dir: string): Promise<void> {
  const fh = await openDir(dir);
  if (!fh) {
    await unlink(dir).catch(unlessGone);
    return;
  }
  try {
    const cut = { top: `/proc/self/fd/${fh.fd}`, moved: 1 };
    while (cut.moved > 0) {
      cut.moved = 0;
      await emptyDir(fh, 1, cut);
    }
  } finally {
    await fh.close();
  }
  await rmdir(dir).catch(unlessGone);
}

async function emptyDir(
  fh: FileHandle,
  depth: number,
  cut: { top: string; moved: number },
): Promise<void> {
  await eachEntry(fh, async (p, e) => {
    if (!e.isDirectory()) return unlink(p).catch(unlessGone);
    if (depth >= CUT_DEPTH) {
      await rename(p, `${cut.top}/.sluice-cut-${randomUUID()}`).catch(unlessGone);
      cut.moved++;
      return;
    }
    const sub = await openDir(p);
    if (!sub) return unlink(p).catch(unlessGone); // swapped for something else: not entered
    try {
      await emptyDir(sub, depth + 1, cut);
    } finally {
      await sub.close();
    }
    await rmdir(p).catch(unlessGone);
  });
}
