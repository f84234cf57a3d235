import fs from "node:fs";

/**
 * Paths starting with `prefix` that this process (any of its threads) holds open, read from
 * /proc/self/fd: how a test sees whether a database file is really closed. Linux only.
 */
export function openFilesUnder(prefix: string): string[] {
  const open: string[] = [];
  for (const fd of fs.readdirSync("/proc/self/fd")) {
    try {
      const target = fs.readlinkSync(`/proc/self/fd/${fd}`);
      if (target.startsWith(prefix)) open.push(target);
    } catch {} // the descriptor readdir itself used, closed by now
  }
  return open;
}
