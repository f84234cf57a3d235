import { readFileSync } from "node:fs";

/** The process's soft limit of open files (`ulimit -n`), from /proc; undefined where unknown. */
export function openFilesLimit(limitsText?: string): number | undefined {
  let text = limitsText;
  if (text === undefined) {
    try {
      text = readFileSync("/proc/self/limits", "utf8");
    } catch {
      return undefined; // not Linux, or /proc not mounted
    }
  }
  const soft = /^Max open files\s+(\S+)/m.exec(text)?.[1];
  return soft === undefined || soft === "unlimited" ? undefined : Number(soft);
}

/**
 * Each waiting request holds a socket (docs/live-progress.md, "Bounds"): a LIMIT_HELD_REQUESTS at
 * or above the open-file limit lets waiting requests use every descriptor before the bound says
 * no, and the service then fails to open its database files, pipes and task sandboxes. Said once
 * at start-up, with what to do.
 */
export function heldRequestsWarning(heldRequests: number, openFiles: number | undefined) {
  // Room for the service's own descriptors: the store, the runner's pipes, other sockets.
  const room = 1024;
  if (openFiles === undefined || heldRequests + room <= openFiles) return undefined;
  return `LIMIT_HELD_REQUESTS (${heldRequests}) leaves less than ${room} of the process's ${openFiles} open files (ulimit -n) for everything else: raise the limit (LimitNOFILE in a systemd unit) or lower LIMIT_HELD_REQUESTS`;
}
