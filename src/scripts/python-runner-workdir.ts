import { chmodSync, chownSync, mkdirSync, readdirSync, rmdirSync, statSync } from "node:fs";
import { chmod, chown, mkdir } from "node:fs/promises";
import path from "node:path";
import { chgrpTree, removeTree } from "./safe-tree.ts";

export interface WorkDir {
  name: string;
  /** Host path (Node's view). */
  dir: string;
  /** This task's own uid (and primary gid), undefined when we cannot switch users. */
  uid: number | undefined;
  /**
   * A shared directory's group: tasks that share a directory (the script nodes of one flow run)
   * each run as a uid of their own, in this supplementary group, which owns the directory.
   */
  gid: number | undefined;
  /** Only this task uses the uid, so it may kill everything the uid owns when it ends. */
  privateUid: boolean;
}

interface Entry {
  /** The uid of a per-uid directory, or the group id of a shared (named) one. */
  uid: number | undefined;
  refs: number;
  ready: Promise<void>;
  /** A one-task directory named after its uid (`u<uid>`), reusable when left empty. */
  perUid: boolean;
  /** Confirmations that the uids of the tasks that used it have nothing left running. */
  sweeps: Promise<boolean>[];
  /** Called once it is cleaned up: a group from a slice keeps that slice's zygote until then. */
  gone?: () => void;
}

/** A preloading zygote's uids (docs/security.md, "Preloading"), and how to keep it meanwhile. */
export interface SliceUids {
  base: number;
  count: number;
  hold(): () => void;
}

const SAFE_NAME = /^[A-Za-z0-9][A-Za-z0-9._-]{0,199}$/;

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
    await removeTree(dir);
  }
}

interface UidRange {
  base: number;
  count: number;
}

const inRange = (id: number | undefined, r: UidRange): boolean =>
  id !== undefined && id >= r.base && id < r.base + r.count;

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
  /** Per range base: where the round robin goes on. */
  #next = new Map<number, number>();
  #inUse = new Set<number>();
  #quarantined = new Set<number>();
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

  /** A free uid of `range` (by default the runner's own), round robin per range. */
  #allocUid(range?: UidRange): number {
    const base = range?.base ?? this.#uidBase;
    const count = range?.count ?? this.#uidCount;
    // Round robin, so a just-freed uid (and anything it left behind) is reused last.
    const next = this.#next.get(base) ?? 0;
    for (let i = 0; i < count; i++) {
      const uid = base + ((next + i) % count);
      if (!this.#inUse.has(uid)) {
        this.#next.set(base, (next + i + 1) % count);
        this.#inUse.add(uid);
        return uid;
      }
    }
    throw new Error(`all ${count} sandbox uids are in use`);
  }

  /**
   * `uids`: the slice of the preloading zygote the task runs on (docs/security.md,
   * "Preloading"), which its uid comes from and, for a shared directory that no task uses yet, its
   * group; the runner's own range otherwise. Undefined when the shared directory is in use with a
   * group of another range: the task must run where that group can be joined.
   */
  async acquire(
    requested: string,
    privateName: boolean,
    uids?: SliceUids,
  ): Promise<WorkDir | undefined> {
    if (!SAFE_NAME.test(requested))
      throw new Error(`invalid working directory name "${requested}"`);
    if (privateName && this.#switchUid) {
      // One task, one uid, one directory named after the uid (reused while left empty).
      const uid = this.#allocUid(uids);
      const name = `u${uid}`;
      const dir = path.join(this.root, name);
      const e: Entry = {
        uid,
        refs: 1,
        perUid: true,
        ready: this.#preparePerUid(dir, uid),
        sweeps: [],
      };
      this.#entries.set(name, e);
      await this.#ready(name, e, undefined);
      return { name, dir, uid, gid: undefined, privateUid: true };
    }
    // A named directory, possibly shared: a group for it, and a uid of its own for each task,
    // so every task may sweep its uid when it ends without touching its neighbours.
    const name = requested;
    const dir = path.join(this.root, name);
    let e = this.#entries.get(name);
    if (e) {
      if (uids && !inRange(e.uid, uids)) return undefined;
      e.refs++;
    } else {
      const gid = this.#switchUid ? this.#allocUid(uids) : undefined;
      e = { uid: gid, refs: 1, perUid: false, ready: this.#prepare(dir, gid), sweeps: [] };
      // The slice must not serve another zygote while a group of it owns a live directory.
      if (uids && gid !== undefined) e.gone = uids.hold();
      this.#entries.set(name, e);
    }
    const uid = this.#switchUid ? this.#allocUid(uids) : undefined;
    await this.#ready(name, e, uid);
    return { name, dir, uid, gid: e.uid, privateUid: uid !== undefined };
  }

  async #ready(name: string, e: Entry, taskUid: number | undefined): Promise<void> {
    try {
      await e.ready;
    } catch (err) {
      if (taskUid !== undefined) this.#inUse.delete(taskUid);
      await this.#releaseEntry(name, true).catch(() => {});
      throw err;
    }
  }

  async #preparePerUid(dir: string, uid: number): Promise<void> {
    await this.#cleaning.get(dir);
    if (this.#spare.delete(uid)) {
      // Synchronous on purpose: one cheap syscall, far cheaper than a thread-pool round trip.
      chmodSync(dir, 0o700); // the last task owned it and may have opened it up
      return;
    }
    // Not known empty (e.g. left by a process that crashed): start from nothing.
    await removeTree(dir);
    await mkdir(dir, { mode: 0o700 });
    await chown(dir, uid, uid);
  }

  async #prepare(dir: string, gid: number | undefined): Promise<void> {
    // A same-named directory from a task that just ended may still be being removed.
    await this.#cleaning.get(dir);
    // Root-owned, the group's, setgid (new files join the group), nobody else's.
    const mode = gid === undefined ? 0o700 : 0o2770;
    try {
      // Synchronous: a few cheap syscalls cost far less than as many thread-pool round trips.
      mkdirSync(dir, { mode: 0o700 });
      if (gid !== undefined) chownSync(dir, 0, gid);
      chmodSync(dir, mode);
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== "EEXIST") throw err;
      // A kept directory from an earlier task: hand all of it to the new group.
      if (gid !== undefined) await chgrpTree(dir, gid);
      chmodSync(dir, mode);
    }
  }

  /**
   * Ends one task's use of its directory. Its uid goes back only once `sweep` has confirmed
   * that nothing of it is left running (docs/security.md): a leftover must not write into a
   * directory the next tenant gets, nor run as the next tenant's uid. A uid whose sweep is not
   * confirmed is never handed out again. When the last user of the directory leaves, the
   * directory is cleaned up after every sweep of its tasks (callers need not wait: the name
   * stays blocked until it is done).
   */
  release(wd: WorkDir, keep: boolean, sweep: (uid: number) => Promise<boolean>): Promise<void> {
    const e = this.#entries.get(wd.name);
    if (!e) return Promise.resolve();
    if (wd.uid !== undefined) {
      const uid = wd.uid;
      const swept = sweep(uid).then((confirmed) => {
        if (!confirmed) this.#quarantined.add(uid);
        // A per-uid directory's uid is freed with the directory, below.
        else if (!e.perUid) this.#inUse.delete(uid);
        return confirmed;
      });
      e.sweeps.push(swept);
    }
    return this.#releaseEntry(wd.name, keep);
  }

  #releaseEntry(name: string, keep: boolean): Promise<void> {
    const e = this.#entries.get(name);
    if (!e || --e.refs > 0) return Promise.resolve();
    this.#entries.delete(name);
    const dir = path.join(this.root, name);
    const uid = e.uid;
    const work = (async () => {
      const confirmed = (await Promise.all(e.sweeps)).every(Boolean);
      if (e.perUid && confirmed && !keep && uid !== undefined && isEmptyDir(dir)) {
        this.#spare.add(uid);
      } else if (!keep) await removeDir(dir);
      else if (uid !== undefined) {
        // Root-owned 0700: a later task that gets this uid or group cannot read what we kept.
        // Mode first: once root owns it, it is already closed (what sees root sees 0700).
        chmodSync(dir, 0o700);
        chownSync(dir, 0, 0);
      }
    })().finally(() => {
      if (uid !== undefined && !this.#quarantined.has(uid)) this.#inUse.delete(uid);
      this.#cleaning.delete(dir);
      e.gone?.();
    });
    this.#cleaning.set(dir, work);
    return work;
  }

  /**
   * A preloading zygote's slice, once that zygote is gone (docs/security.md, "Preloading"): what
   * it said of its uids is not trusted either way. Its directories are not known empty any more
   * (the next task of each makes its directory anew); and when `clean` (Node found no process of
   * the slice left), a uid whose sweep it reported failed is free again, or it could make every
   * uid of the slice unusable for the next zygote's tasks.
   */
  retireRange(range: UidRange, clean: boolean): void {
    for (const uid of this.#spare) if (inRange(uid, range)) this.#spare.delete(uid);
    if (!clean) return;
    for (const uid of this.#quarantined)
      if (inRange(uid, range)) {
        this.#quarantined.delete(uid);
        this.#inUse.delete(uid);
      }
  }

  /** Uids whose leftovers could not be confirmed dead: never handed out again. */
  get quarantined(): number {
    return this.#quarantined.size;
  }

  /** Waits for background clean-ups (for close()). */
  async settle(): Promise<void> {
    await Promise.allSettled([...this.#cleaning.values()]);
  }
}

/** Without bwrap, task uids reach their dir through the real path: every ancestor needs o+x. */
export function warnIfUntraversable(
  dir: string,
  logger: { warn(obj: unknown, msg?: string): void },
): void {
  for (let d = path.dirname(dir); ; d = path.dirname(d)) {
    if ((statSync(d).mode & 0o001) === 0) {
      logger.warn(
        { dir: d },
        "task uids cannot traverse this directory: scripts see their cwd but absolute paths into it fail",
      );
      return;
    }
    if (d === path.dirname(d)) return;
  }
}
