import { chmodSync, chownSync, mkdirSync, readdirSync, rmdirSync } from "node:fs";
import { chmod, chown, lchown, lstat, mkdir, readdir, rm } from "node:fs/promises";
import path from "node:path";

export interface WorkDir {
  name: string;
  /** Host path (Node's view). */
  dir: string;
  /** Task uid (and gid), undefined when we cannot switch users. */
  uid: number | undefined;
  /** Only this task uses the uid, so it may kill everything the uid owns when it ends. */
  privateUid: boolean;
}

interface Entry {
  uid: number | undefined;
  refs: number;
  ready: Promise<void>;
  /** A one-task directory named after its uid (`u<uid>`), reusable when left empty. */
  perUid: boolean;
}

const SAFE_NAME = /^[A-Za-z0-9][A-Za-z0-9._-]{0,199}$/;

async function chownTree(p: string, uid: number): Promise<void> {
  await lchown(p, uid, uid);
  const st = await lstat(p);
  if (!st.isDirectory()) return;
  for (const e of await readdir(p)) await chownTree(path.join(p, e), uid);
}

/** One getdents on a directory a task just left: synchronous, see #preparePerUid. */
function isEmptyDir(dir: string): boolean {
  try {
    return readdirSync(dir).length === 0;
  } catch {
    return false;
  }
}

async function removeDir(dir: string): Promise<void> {
  try {
    rmdirSync(dir); // most tasks write nothing: one (synchronous) syscall
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    if (code === "ENOENT") return;
    if (code !== "ENOTEMPTY" && code !== "EEXIST") throw err;
    await rm(dir, { recursive: true, force: true });
  }
}

/**
 * Working directories and sandbox uids. Tasks sharing a directory name share its uid
 * (refcounted); concurrent tasks otherwise never share a uid, so RLIMIT_NPROC is per task and
 * 0700 directories keep tasks out of each other's files.
 */
export class WorkDirs {
  readonly root: string;
  readonly #uidBase: number;
  readonly #uidCount: number;
  readonly #switchUid: boolean;
  #next = 0;
  #inUse = new Set<number>();
  #entries = new Map<string, Entry>();
  #cleaning = new Map<string, Promise<void>>();
  /**
   * Uids whose `u<uid>` directory a finished task left empty (and whose processes were swept):
   * the next task of that uid reuses it. On ext4 a mkdir + chown + rmdir per task costs about
   * 0.1 ms of syscalls and more of the thread pool; a reused directory needs one chmod.
   */
  #spare = new Set<number>();

  constructor(o: { root: string; uidBase: number; uidCount: number; switchUid: boolean }) {
    this.root = o.root;
    this.#uidBase = o.uidBase;
    this.#uidCount = o.uidCount;
    this.#switchUid = o.switchUid;
  }

  async init(): Promise<void> {
    mkdirSync(this.root, { recursive: true });
    // 0711: tasks can enter their own dir but cannot list the others.
    await chmod(this.root, 0o711);
  }

  #allocUid(): number {
    // Round robin, so a just-freed uid (and anything it left behind) is reused last.
    for (let i = 0; i < this.#uidCount; i++) {
      const uid = this.#uidBase + ((this.#next + i) % this.#uidCount);
      if (!this.#inUse.has(uid)) {
        this.#next = (this.#next + i + 1) % this.#uidCount;
        this.#inUse.add(uid);
        return uid;
      }
    }
    throw new Error(`all ${this.#uidCount} sandbox uids are in use`);
  }

  async acquire(requested: string, privateName: boolean): Promise<WorkDir> {
    if (!SAFE_NAME.test(requested))
      throw new Error(`invalid working directory name "${requested}"`);
    let name = requested;
    let e = this.#entries.get(name);
    if (e) {
      e.refs++;
    } else {
      const uid = this.#switchUid ? this.#allocUid() : undefined;
      const perUid = privateName && uid !== undefined;
      if (perUid) name = `u${uid}`;
      const dir = path.join(this.root, name);
      e = {
        uid,
        refs: 1,
        perUid,
        ready: perUid ? this.#preparePerUid(dir, uid as number) : this.#prepare(dir, uid),
      };
      this.#entries.set(name, e);
    }
    const dir = path.join(this.root, name);
    try {
      await e.ready;
    } catch (err) {
      await this.release(name, true).catch(() => {});
      throw err;
    }
    return { name, dir, uid: e.uid, privateUid: privateName && e.refs === 1 };
  }

  async #preparePerUid(dir: string, uid: number): Promise<void> {
    await this.#cleaning.get(dir);
    if (this.#spare.delete(uid)) {
      // Synchronous on purpose: one cheap syscall, far cheaper than a thread-pool round trip.
      chmodSync(dir, 0o700); // the last task owned it and may have opened it up
      return;
    }
    // Not known empty (e.g. left by a process that crashed): start from nothing.
    await rm(dir, { recursive: true, force: true });
    await mkdir(dir, { mode: 0o700 });
    await chown(dir, uid, uid);
  }

  async #prepare(dir: string, uid: number | undefined): Promise<void> {
    // A same-named directory from a task that just ended may still be being removed.
    await this.#cleaning.get(dir);
    try {
      // Synchronous: two cheap syscalls cost far less than two thread-pool round trips.
      mkdirSync(dir, { mode: 0o700 });
      if (uid !== undefined) chownSync(dir, uid, uid);
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== "EEXIST") throw err;
      // A kept directory from an earlier task: hand all of it to the new uid.
      if (uid !== undefined) await chownTree(dir, uid);
      await chmod(dir, 0o700);
    }
  }

  /**
   * Drops one reference. When it was the last, cleans up in the background (callers need not
   * wait: the uid stays reserved and the name blocked until it is done) and calls `onFree`
   * with the uid once nothing of the task can touch the directory anymore.
   */
  release(name: string, keep: boolean, onFree?: (uid: number) => void): Promise<void> {
    const e = this.#entries.get(name);
    if (!e || --e.refs > 0) return Promise.resolve();
    this.#entries.delete(name);
    const dir = path.join(this.root, name);
    const uid = e.uid;
    if (uid !== undefined) onFree?.(uid);
    const perUid = e.perUid;
    const work = (async () => {
      if (perUid && !keep && uid !== undefined && isEmptyDir(dir)) {
        this.#spare.add(uid);
      } else if (!keep) await removeDir(dir);
      else if (uid !== undefined) {
        // Root-owned 0700: a later task that gets this uid cannot read what we kept.
        chownSync(dir, 0, 0);
        chmodSync(dir, 0o700);
      }
    })().finally(() => {
      if (uid !== undefined) this.#inUse.delete(uid);
      this.#cleaning.delete(dir);
    });
    this.#cleaning.set(dir, work);
    return work;
  }

  /** Waits for background clean-ups (for close()). */
  async settle(): Promise<void> {
    await Promise.allSettled([...this.#cleaning.values()]);
  }
}
