import fs from "node:fs";

/**
 * CPU time per process tree, from /proc: which of a bench's processes a call's CPU went to. A
 * task's processes are short-lived; when one exits, its time moves into its parent's counts of
 * reaped children, so each process is read with those (utime + stime + cutime + cstime) and a
 * process that exits between two snapshots is taken out at its last reading (its time shows up
 * again in the parent).
 */
interface Proc {
  ppid: number;
  /** Own and reaped children's CPU, ms. */
  cpuMs: number;
  /** Own CPU only, ms. */
  ownMs: number;
}

type Snapshot = Map<number, Proc>;

const TICK_MS = 10; // USER_HZ is 100 on Linux

function read(pid: number): Proc | undefined {
  try {
    const s = fs.readFileSync(`/proc/${pid}/stat`, "utf8");
    // Fields after the command name, which may itself hold spaces or parentheses.
    const f = s.slice(s.lastIndexOf(")") + 2).split(" ");
    const [utime, stime, cutime, cstime] = [11, 12, 13, 14].map((i) => Number(f[i] ?? 0));
    const own = (utime ?? 0) + (stime ?? 0);
    return {
      ppid: Number(f[1]),
      cpuMs: (own + (cutime ?? 0) + (cstime ?? 0)) * TICK_MS,
      ownMs: own * TICK_MS,
    };
  } catch {
    return undefined; // gone meanwhile
  }
}

export function snapshot(): Snapshot {
  const m: Snapshot = new Map();
  for (const name of fs.readdirSync("/proc")) {
    if (!/^\d+$/.test(name)) continue;
    const p = read(Number(name));
    if (p) m.set(Number(name), p);
  }
  return m;
}

/** The first of `roots` that `pid` is or descends from, else "other". */
function groupOf(s: Snapshot, pid: number, roots: Map<number, string>): string {
  let p: number | undefined = pid;
  for (let depth = 0; p !== undefined && p > 1 && depth < 64; depth++) {
    const name = roots.get(p);
    if (name) return name;
    p = s.get(p)?.ppid;
  }
  return "other";
}

/**
 * CPU ms per group between two snapshots; `roots` names process trees (a root's own time and
 * its descendants'), checked nearest first: a root inside another root's tree is its own group.
 */
export function cpuByTree(
  before: Snapshot,
  after: Snapshot,
  roots: Map<number, string>,
): Map<string, number> {
  const out = new Map<string, number>();
  const add = (g: string, ms: number) => out.set(g, (out.get(g) ?? 0) + ms);
  for (const [pid, p] of after)
    add(groupOf(after, pid, roots), p.cpuMs - (before.get(pid)?.cpuMs ?? 0));
  for (const [pid, p] of before) if (!after.has(pid)) add(groupOf(before, pid, roots), -p.cpuMs);
  return out;
}

/** A process's own CPU ms between two snapshots (its children's not included). */
export function ownCpu(before: Snapshot, after: Snapshot, pid: number): number {
  return (after.get(pid)?.ownMs ?? 0) - (before.get(pid)?.ownMs ?? 0);
}
