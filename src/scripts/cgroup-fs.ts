import fs from "node:fs";
import path from "node:path";
import { type Clock, sleep, systemClock } from "../clock.ts";
import { cgroupMounts } from "./cgroup-mounts.ts";

/**
 * The cgroup file systems tasks are put in (docs/security.md, "One cgroup per task"): cgroup v2
 * with the memory and pids controllers where the host has it, else the cgroup v1 memory, pids and
 * freezer hierarchies (and cpu, when mounted). Everything here is a plain file operation on them,
 * done by Node as root; nothing of it is visible to a task.
 */
export type CgroupVersion = "v2" | "v1";

/** Where the runners' cgroups live in each hierarchy: `sluice/<block>/t<n>`. */
export const PARENT = "sluice";

export interface CgroupLimits {
  memoryBytes: number;
  processes: number;
}

/** The freezer first: CgroupFs kills through the first hierarchy. */
const V1_REQUIRED = ["freezer", "memory", "pids"] as const;
const V1_OPTIONAL = ["cpu"] as const;
const V2_REQUIRED = ["memory", "pids"] as const;

const read = (file: string): string => fs.readFileSync(file, "utf8");
/** A counter of a flat-keyed cgroup file's text (`oom_kill 3`), 0 when absent. */
export function counterIn(text: string, key: string): number {
  const at = `\n${text}`.indexOf(`\n${key} `); // where the key's line starts in `text`
  return at < 0 ? 0 : Number.parseInt(text.slice(at + key.length + 1), 10);
}
const pidsIn = (file: string): number[] =>
  read(file)
    .split("\n")
    .filter((l) => l !== "")
    .map(Number);
function killPid(pid: number): void {
  try {
    process.kill(pid, "SIGKILL");
  } catch {
    // gone already
  }
}

/**
 * The hierarchies tasks' cgroups live in (v2: one; v1: one per controller, the freezer first, as
 * it is the one that kills), each cgroup `name` under `parent` in every one of them.
 */
export class CgroupFs {
  readonly version: CgroupVersion;
  readonly #mounts: string[];
  /** Index in #mounts of each v1 controller's hierarchy (v2: all 0). */
  readonly #at: Map<string, number>;
  readonly #parent: string;
  /** Paces the kill rounds; the system clock when a test or the probe builds one alone. */
  readonly #clock: Clock;

  constructor(
    version: CgroupVersion,
    mounts: Array<[string, string]>,
    parent: string,
    clock: Clock = systemClock,
  ) {
    this.version = version;
    this.#mounts = mounts.map(([, m]) => m);
    this.#at = new Map(mounts.map(([c], i) => [c, i]));
    this.#parent = parent;
    this.#clock = clock;
  }

  /** `name`'s directory in every hierarchy (the freezer's first in v1). */
  dirs(name: string): string[] {
    return this.#mounts.map((m) => path.join(m, this.#parent, name));
  }

  /** The file whose processes are the cgroup's: v2 its own, v1 the freezer's. */
  procs(name: string): string {
    return path.join(this.dirs(name)[0] as string, "cgroup.procs");
  }

  /** The files a pid is written to, to join `name` in every hierarchy. */
  joinFiles(name: string): string[] {
    return this.dirs(name).map((d) => path.join(d, "cgroup.procs"));
  }

  /** Creates the parent directories (enabling v2 controllers on the way). Throws what failed. */
  createParent(): void {
    if (this.version === "v1") {
      for (const d of this.dirs("")) fs.mkdirSync(d, { recursive: true });
      return;
    }
    const mount = this.#mounts[0] as string;
    let dir = mount;
    this.#enableControllers(dir);
    for (const part of this.#parent.split("/").filter(Boolean)) {
      dir = path.join(dir, part);
      fs.mkdirSync(dir, { recursive: true });
      this.#enableControllers(dir);
    }
  }

  /** v2: children of `dir` get memory, pids (and cpu when the host offers it). */
  #enableControllers(dir: string): void {
    const have = new Set(read(path.join(dir, "cgroup.subtree_control")).trim().split(" "));
    const offered = new Set(read(path.join(dir, "cgroup.controllers")).trim().split(" "));
    for (const c of [...V2_REQUIRED, "cpu"]) {
      if (have.has(c) || (!offered.has(c) && c === "cpu")) continue;
      try {
        fs.writeFileSync(path.join(dir, "cgroup.subtree_control"), `+${c}`);
      } catch (err) {
        if (c === "cpu") continue; // a fair CPU share is a bonus; memory and pids are not
        const code = (err as NodeJS.ErrnoException).code;
        const why =
          code === "EBUSY"
            ? " (this cgroup holds processes: start the service in a child cgroup of it)"
            : "";
        throw new Error(`cannot enable the ${c} controller in ${dir}: ${code}${why}`);
      }
    }
  }

  /** Creates `name` with the task limits: memory (swap included), processes. */
  create(name: string, limits: CgroupLimits): void {
    const dirs = this.dirs(name);
    for (const d of dirs) fs.mkdirSync(d, { recursive: true });
    const set = (file: string, value: string | number, optional = false) => {
      try {
        fs.writeFileSync(file, String(value));
      } catch (err) {
        if (!optional || (err as NodeJS.ErrnoException).code !== "ENOENT") throw err;
      }
    };
    const dir = (c: string) => dirs[this.#index(c)] as string;
    if (this.version === "v2") {
      const d = dirs[0] as string;
      set(path.join(d, "memory.max"), limits.memoryBytes);
      set(path.join(d, "memory.swap.max"), 0, true); // no swap: the limit is the limit
      set(path.join(d, "memory.oom.group"), 1, true); // an OOM kill takes the whole task at once
      set(path.join(d, "pids.max"), limits.processes);
      return;
    }
    set(path.join(dir("memory"), "memory.limit_in_bytes"), limits.memoryBytes);
    // memory + swap, where the kernel accounts swap: swapping does not extend the limit.
    set(path.join(dir("memory"), "memory.memsw.limit_in_bytes"), limits.memoryBytes, true);
    set(path.join(dir("pids"), "pids.max"), limits.processes);
  }

  #index(controller: string): number {
    return this.#at.get(controller) ?? 0;
  }

  /** Every process in `name`. */
  pids(name: string): number[] {
    try {
      return pidsIn(this.procs(name));
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === "ENOENT") return [];
      throw err;
    }
  }

  /**
   * Kills everything in `name` and resolves true once it is empty (false: still not after
   * `ms`). v2: cgroup.kill. v1: freeze, SIGKILL each process, thaw, so that nothing forks
   * between the listing and the kill; again until none is left.
   */
  async killAll(name: string, ms = 5000): Promise<boolean> {
    const deadline = this.#clock.now() + ms;
    for (let round = 0; ; round++) {
      if (this.pids(name).length === 0) return true;
      if (this.#clock.now() > deadline) return false;
      if (this.version === "v2") this.#killV2(name);
      else await this.#killV1(name);
      await sleep(this.#clock, Math.min(20, 1 + round));
    }
  }

  #killV2(name: string): void {
    try {
      fs.writeFileSync(path.join(this.dirs(name)[0] as string, "cgroup.kill"), "1");
    } catch {
      for (const pid of this.pids(name)) killPid(pid); // before Linux 5.14: no cgroup.kill
    }
  }

  async #killV1(name: string): Promise<void> {
    const state = path.join(this.dirs(name)[0] as string, "freezer.state");
    fs.writeFileSync(state, "FROZEN");
    try {
      // A process in an uninterruptible sleep may keep it FREEZING: kill what is there anyway.
      for (let i = 0; i < 50 && read(state).trim() !== "FROZEN"; i++) await sleep(this.#clock, 1);
      for (const pid of this.pids(name)) killPid(pid);
    } finally {
      fs.writeFileSync(state, "THAWED"); // a frozen process dies of its SIGKILL once thawed
    }
  }

  /**
   * The files the runner reads after every task, kept open by it (docs/security.md, "One cgroup
   * per task"): the count of processes killed for memory (`oom_kill`), of processes still
   * counted (a killed one counts until it is reaped), and the memory statistics (`shmem`: shared
   * memory still charged).
   */
  counterFiles(name: string): { oom: string; pids: string; stat: string } {
    const memory = this.dirs(name)[this.#index("memory")] as string;
    return {
      oom: path.join(memory, this.version === "v2" ? "memory.events" : "memory.oom_control"),
      pids: path.join(this.dirs(name)[this.#index("pids")] as string, "pids.current"),
      stat: path.join(memory, "memory.stat"),
    };
  }

  /**
   * `name` (created if need be) in the first hierarchy only (v1 the freezer's, which kills): no
   * limit, only a cgroup where `killAll(name)` finds what is in it and whatever that forks
   * (docs/security.md, "The end of a task"). Returns the file a process joins it by.
   */
  holding(name: string): string {
    const dir = this.dirs(name)[0] as string;
    fs.mkdirSync(dir, { recursive: true });
    return path.join(dir, "cgroup.procs");
  }

  /** Removes `name` in every hierarchy (it must be empty of processes). */
  remove(name: string): void {
    for (const d of this.dirs(name)) {
      try {
        fs.rmdirSync(d);
      } catch (err) {
        if ((err as NodeJS.ErrnoException).code !== "ENOENT") throw err;
      }
    }
  }

  /** Names of the cgroups under the parent, in any hierarchy (leftovers of an earlier life). */
  children(): string[] {
    const names = new Set<string>();
    for (const d of this.dirs("")) {
      try {
        for (const e of fs.readdirSync(d, { withFileTypes: true }))
          if (e.isDirectory()) names.add(e.name);
      } catch {
        // not created yet
      }
    }
    return [...names];
  }
}

/**
 * The cgroup file system to use under `mountRoot` (normally /sys/fs/cgroup), with tasks' cgroups
 * under `parent` in it; or why there is none.
 */
export function findCgroupFs(
  mountRoot: string,
  parent: string,
  clock?: Clock,
): { fs: CgroupFs } | { problem: string } {
  const m = cgroupMounts(mountRoot);
  if (m.v2 !== undefined) {
    try {
      const offered = read(path.join(m.v2, "cgroup.controllers")).trim().split(" ");
      if (V2_REQUIRED.every((c) => offered.includes(c)))
        return { fs: new CgroupFs("v2", [["", m.v2]], parent, clock) };
    } catch {
      // unreadable: try v1
    }
  }
  const missing = V1_REQUIRED.filter((c) => !m.v1.has(c));
  if (missing.length === 0) {
    const mounts = [...V1_REQUIRED, ...V1_OPTIONAL].flatMap((c): Array<[string, string]> => {
      const point = m.v1.get(c);
      return point === undefined ? [] : [[c, point]];
    });
    return { fs: new CgroupFs("v1", mounts, parent, clock) };
  }
  return {
    problem:
      `no cgroup v2 with the memory and pids controllers, nor the cgroup v1 memory, pids and ` +
      `freezer hierarchies, is mounted under ${mountRoot}` +
      (m.v1.size > 0 ? ` (v1 lacks ${missing.join(", ")})` : ""),
  };
}
