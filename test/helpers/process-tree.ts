import { readdirSync, readFileSync } from "node:fs";

/** Command lines of the live Python processes descended from this test process. */
export function pythonDescendants(): string[] {
  const parent = new Map<number, number>();
  for (const entry of readdirSync("/proc")) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      // Field 4 of /proc/<pid>/stat, after the parenthesised command name.
      const stat = readFileSync(`/proc/${entry}/stat`, "utf8");
      const ppid = Number(stat.slice(stat.lastIndexOf(")") + 2).split(" ")[1]);
      parent.set(Number(entry), ppid);
    } catch {
      // the process ended while we looked
    }
  }
  const out: string[] = [];
  for (const pid of parent.keys()) {
    let p: number | undefined = parent.get(pid);
    while (p !== undefined && p > 1 && p !== process.pid) p = parent.get(p);
    if (p !== process.pid) continue;
    try {
      const cmd = readFileSync(`/proc/${pid}/cmdline`, "utf8").split("\0").join(" ").trim();
      if (/python/.test(cmd)) out.push(cmd);
    } catch {
      // ended
    }
  }
  return out;
}

/** Pids of the live (not zombie) processes whose real uid is `uid`. */
export function processesOf(uid: number): number[] {
  return readdirSync("/proc")
    .filter((n) => /^\d+$/.test(n))
    .filter((n) => {
      try {
        const status = readFileSync(`/proc/${n}/status`, "latin1");
        return Number(/^Uid:\s+(\d+)/m.exec(status)?.[1]) === uid && !/^State:\s+Z/m.test(status);
      } catch {
        return false;
      }
    })
    .map(Number);
}

/** A process as /proc shows it; `key` (pid and start time) names it even once its pid is reused. */
export interface Proc {
  pid: number;
  ppid: number;
  /** Its session: a process that leaves its parent's tree keeps it, unless it starts its own. */
  sid: number;
  key: string;
  cmd: string;
}

/** Every live (not zombie) process, by pid. */
export function liveProcesses(): Map<number, Proc> {
  const procs = new Map<number, Proc>();
  for (const entry of readdirSync("/proc")) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const stat = readFileSync(`/proc/${entry}/stat`, "utf8");
      // The fields after the parenthesised command name: state (3) ppid (4) pgrp session (6) …
      // starttime (22).
      const f = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
      if (f[0] === "Z" || f[0] === "X") continue;
      const cmd = readFileSync(`/proc/${entry}/cmdline`, "utf8").split("\0").join(" ").trim();
      const pid = Number(entry);
      procs.set(pid, { pid, ppid: Number(f[1]), sid: Number(f[3]), key: `${pid}@${f[19]}`, cmd });
    } catch {
      // the process ended while we looked
    }
  }
  return procs;
}

/**
 * Every process started under `root` (a pid), recorded while `root` lives: a process its parent
 * left behind is re-parented (to init, or a subreaper), so only what was recorded before, or
 * is still below something recorded, or is in a session one of them started, is found after.
 */
export class Descendants {
  readonly #root: number;
  /** Every descendant ever seen, by key. */
  readonly seen = new Map<string, Proc>();
  /** Sessions descendants started (not the root's own). */
  readonly #sessions = new Set<number>();
  #rootSid: number | undefined;

  constructor(root: number) {
    this.#root = root;
  }

  /** Records what is below the root now (and below anything recorded); returns them. */
  scan(): Proc[] {
    const procs = liveProcesses();
    this.#rootSid ??= procs.get(this.#root)?.sid;
    const found = [...procs.values()].filter((p) => this.#below(p, procs));
    for (const p of found) {
      this.seen.set(p.key, p);
      if (p.sid !== this.#rootSid && p.sid === p.pid) this.#sessions.add(p.sid);
    }
    return found;
  }

  #below(p: Proc, procs: Map<number, Proc>): boolean {
    const recorded = (q: Proc) => q.pid === this.#root || this.seen.has(q.key);
    if (this.seen.has(p.key) || this.#sessions.has(p.sid)) return true;
    for (let q = procs.get(p.ppid), hops = 0; q && hops < 64; q = procs.get(q.ppid), hops++)
      if (recorded(q)) return true;
    return false;
  }

  /** Those of them still alive (the root itself aside). */
  alive(): Proc[] {
    return this.scan().filter((p) => p.pid !== this.#root);
  }
}

/** The processes whose parent is `pid` and whose command line holds `what`. */
export function childrenOf(pid: number, what: string): number[] {
  const text = (p: string) => {
    try {
      return readFileSync(p, "latin1");
    } catch {
      return ""; // gone while we looked
    }
  };
  return readdirSync("/proc")
    .filter((n) => /^\d+$/.test(n))
    .filter((n) => {
      const stat = text(`/proc/${n}/stat`);
      const ppid = Number(stat.slice(stat.lastIndexOf(")") + 2).split(" ")[1]);
      return ppid === pid && text(`/proc/${n}/cmdline`).includes(what);
    })
    .map(Number);
}
