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
