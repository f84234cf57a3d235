import fs from "node:fs";
import { type Clock, sleep, systemClock } from "../clock.ts";
import {
  type CgroupFs,
  type CgroupLimits,
  type CgroupVersion,
  counterIn,
  findCgroupFs,
  PARENT,
} from "./cgroup-fs.ts";
import type { Logger } from "./python-runner-sandbox.ts";

/**
 * One cgroup per task (docs/security.md, "One cgroup per task"). Cgroups are kept in a pool and
 * reused: each pre-forked child joins a free one as soon as the zygote reports it, while it is
 * still idle and runs no tenant code, so the join (a cgroup migration costs a few hundredths of a
 * millisecond of CPU per hierarchy, and can wait on the kernel for milliseconds) is off the task's
 * path. When the task ends, Node
 * kills everything in its cgroup and the cgroup is reused only once it is confirmed empty.
 */
export interface TaskCgroups {
  readonly version: CgroupVersion;
  /** Puts a new idle child in a cgroup of its own (called when the zygote reports it). */
  bind(pid: number): void;
  /**
   * The file by which a zygote process joins the block's `zygotes` cgroup before it runs
   * (undefined: it cannot be had): what it forks is born there, and what outlives a killed
   * service there is killed by the block's next start-up, with the tasks' cgroups
   * (docs/security.md, "The end of a task").
   */
  zygoteProcs(): string | undefined;
  /** Hands over `pid`'s cgroup: to its task (take it with the child), or to be released. */
  take(pid: number): TaskCgroup;
  /** Resolves once every cgroup released so far is back in the pool or retired. */
  settled(): Promise<void>;
  close(): Promise<void>;
}

/** The cgroup of one child, and so of its task and everything the task starts. */
export interface TaskCgroup {
  /** Resolves true once the child is in it, false when it could not be put in one. */
  readonly ready: Promise<boolean>;
  /** Whether the kernel killed a process of it for memory since the child joined. */
  oomKilled(): boolean;
  /**
   * Kills everything left in it; resolves true once it is empty (it is then free for another
   * child), false when that cannot be confirmed (it is never reused).
   */
  release(): Promise<boolean>;
}

interface Slot {
  name: string;
  /** Open cgroup.procs of every hierarchy: a join is one write to each. */
  join: number[];
  /** Open counter files (CgroupFs.counterFiles), read with one pread each. */
  oom: number;
  pids: number;
  stat: number;
  /** The OOM-kill count when it was last free: its task's kills are those above it. */
  oomBase: number;
}

/** The block's cgroup of its zygote processes (never a task's: tasks' are `t<n>`). */
const ZYGOTES = "zygotes";

/**
 * The cgroups of one runner, under `sluice/<block>` (`block` is unique to this service process,
 * e.g. its uid block). Whatever an earlier life of the block left there is killed first.
 */
export async function createTaskCgroups(o: {
  mountRoot: string;
  block: string;
  limits: CgroupLimits;
  logger: Logger;
  /** Paces the waits for a cgroup to empty; the system clock when a test builds one alone. */
  clock?: Clock;
}): Promise<TaskCgroups> {
  const clock = o.clock ?? systemClock;
  const found = findCgroupFs(o.mountRoot, `${PARENT}/${o.block}`, clock);
  if ("problem" in found) throw new Error(found.problem);
  const cg = found.fs;
  cg.createParent();
  let killed = 0;
  for (const name of cg.children()) {
    killed += cg.pids(name).length;
    if (!(await cg.killAll(name)))
      throw new Error(`cannot empty the cgroup ${cg.dirs(name)[0]} left by an earlier run`);
    cg.remove(name);
  }
  // What a killed earlier life left: its tasks, and its zygotes and their children (`zygotes`).
  if (killed > 0)
    o.logger.warn({ killed, block: o.block }, "killed processes left in this block's cgroups");
  return new SlotPool(cg, o.limits, o.logger, clock);
}

class SlotPool implements TaskCgroups {
  readonly version: CgroupVersion;
  readonly #cg: CgroupFs;
  readonly #limits: CgroupLimits;
  readonly #logger: Logger;
  readonly #clock: Clock;
  #free: Slot[] = [];
  #all = new Set<Slot>();
  #next = 0;
  /** The cgroup of each child not taken yet, once it joined (undefined: it could not). */
  #bound = new Map<number, Promise<Slot | undefined>>();
  #closed = false;

  constructor(cg: CgroupFs, limits: CgroupLimits, logger: Logger, clock: Clock) {
    this.version = cg.version;
    this.#cg = cg;
    this.#limits = limits;
    this.#logger = logger;
    this.#clock = clock;
  }

  #newSlot(): Slot {
    const name = `t${this.#next++}`;
    this.#cg.create(name, this.#limits);
    const files = this.#cg.counterFiles(name);
    const open = (file: string, flags: string) => fs.openSync(file, flags);
    const slot: Slot = {
      name,
      join: this.#cg.joinFiles(name).map((f) => open(f, "w")),
      oom: open(files.oom, "r"),
      pids: open(files.pids, "r"),
      stat: open(files.stat, "r"),
      oomBase: 0,
    };
    this.#all.add(slot);
    slot.oomBase = this.#oomKills(slot);
    return slot;
  }

  /** A counter file's text: one pread at 0 (the kernel renders it afresh), no open or close. */
  #buf = Buffer.alloc(16384);
  #read(fd: number): string {
    return this.#buf.toString("latin1", 0, fs.readSync(fd, this.#buf, 0, this.#buf.length, 0));
  }
  #oomKills = (slot: Slot) => counterIn(this.#read(slot.oom), "oom_kill");
  #pidsCount = (slot: Slot) => Number.parseInt(this.#read(slot.pids), 10);
  #shmem = (slot: Slot) => counterIn(this.#read(slot.stat), "shmem");

  bind(pid: number): void {
    this.#bound.set(pid, this.#join(pid));
  }

  zygoteProcs(): string | undefined {
    try {
      return this.#cg.holding(ZYGOTES);
    } catch (err) {
      // Its zygotes still die with their parents, only not swept by the next start-up.
      this.#logger.warn({ err }, "cannot create the cgroup of this block's python zygotes");
      return undefined;
    }
  }

  take(pid: number): TaskCgroup {
    const bound = this.#bound.get(pid) ?? Promise.resolve(undefined);
    this.#bound.delete(pid); // a later child with the same pid is another one
    let slot: Slot | undefined;
    let released: Promise<boolean> | undefined;
    return {
      ready: bound.then((s) => {
        slot = s;
        return s !== undefined;
      }),
      oomKilled: () => slot !== undefined && this.#oomKills(slot) > slot.oomBase,
      release: () => {
        released ??= bound.then((s) => (s === undefined ? true : this.#recycle(s)));
        return released;
      },
    };
  }

  async #join(pid: number): Promise<Slot | undefined> {
    let slot: Slot | undefined;
    try {
      slot = this.#free.pop() ?? this.#newSlot();
      const text = String(pid);
      // In the thread pool: a migration may wait for the kernel, never Node's event loop.
      await Promise.all(
        slot.join.map(
          (fd) =>
            new Promise<void>((resolve, reject) =>
              fs.write(fd, text, (err) => (err ? reject(err) : resolve())),
            ),
        ),
      );
      return slot;
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== "ESRCH")
        this.#logger.error({ err, pid }, "cannot put a task process in its cgroup");
      if (slot) void this.#recycle(slot);
      return undefined;
    }
  }

  /** Slots being emptied or settling: close() waits for them. */
  #recycling = new Set<Promise<unknown>>();

  #track<T>(p: Promise<T>): Promise<T> {
    const tracked = p.finally(() => this.#recycling.delete(tracked));
    this.#recycling.add(tracked);
    return tracked;
  }

  /**
   * Kills everything in `slot`; true once it is empty. It goes back to the pool only after it
   * settled (below); false when it cannot be confirmed empty (it is then never reused).
   */
  #recycle(slot: Slot): Promise<boolean> {
    return this.#track(
      (async () => {
        const { name } = slot;
        try {
          if (!this.#all.has(slot)) return true; // retired by close(), which killed all in it
          // Usually nothing is left: the zygote reaped the task's child, and it left nothing.
          if (this.#pidsCount(slot) === 0 || (await this.#cg.killAll(name))) {
            void this.#track(this.#settle(slot));
            return true;
          }
          this.#logger.error({ cgroup: this.#cg.dirs(name)[0] }, "task cgroup not confirmed empty");
        } catch (err) {
          this.#logger.error({ err, cgroup: name }, "cannot empty a task cgroup");
        }
        return false;
      })(),
    );
  }

  /**
   * A slot goes back to the pool only once nothing of its last task counts against the next
   * one's limits: its killed processes reaped (they count as processes until then; the zygote
   * reaps them within a second), and no shared memory left charged to it (a SysV segment, a file
   * in a tmpfs), which a task's own IPC namespace frees shortly after its last process is gone.
   * A slot that does not settle is retired.
   */
  async #settle(slot: Slot): Promise<void> {
    const { name } = slot;
    try {
      const settled = () => this.#pidsCount(slot) === 0 && this.#shmem(slot) === 0;
      for (let waited = 0; !settled() && waited < 2000 && !this.#closed; waited += 20)
        await sleep(this.#clock, 20);
      if (!this.#closed && settled()) {
        slot.oomBase = this.#oomKills(slot);
        this.#free.push(slot);
        return;
      }
      const shmem = this.#shmem(slot);
      if (shmem > 0)
        this.#logger.warn({ shmem, cgroup: name }, "task left shared memory: cgroup retired");
    } catch (err) {
      this.#logger.error({ err, cgroup: name }, "cannot read a task cgroup's counters");
    }
    this.#retire(slot);
  }

  #retire(slot: Slot): void {
    if (!this.#all.delete(slot)) return;
    for (const fd of [...slot.join, slot.oom, slot.pids, slot.stat]) fs.closeSync(fd);
    try {
      this.#cg.remove(slot.name);
    } catch (err) {
      this.#logger.warn({ err, cgroup: slot.name }, "cannot remove a task cgroup");
    }
  }

  async settled(): Promise<void> {
    while (this.#recycling.size > 0) await Promise.allSettled([...this.#recycling]);
  }

  async close(): Promise<void> {
    this.#closed = true;
    for (const pid of [...this.#bound.keys()]) void this.take(pid).release();
    await this.settled();
    // What is left belongs to tasks still ending, or could not be emptied: kill, then remove.
    for (const slot of [...this.#all]) {
      await this.#cg.killAll(slot.name).catch(() => false);
      this.#retire(slot);
    }
    this.#free = [];
    try {
      // The zygotes exited before (the runner closes them first): whatever is still there goes.
      await this.#cg.killAll(ZYGOTES);
      this.#cg.remove(ZYGOTES);
      this.#cg.remove("");
    } catch {
      // something is still in it: the next start-up of this block kills and removes it
    }
  }
}
