import { closeSync, constants, fstatSync, openSync, readFileSync } from "node:fs";
import net from "node:net";

/** A pre-forked child waiting for exactly one task, and Node's ends of its four pipes. */
export interface Child {
  pid: number;
  /** Node writes the task here. */
  task: net.Socket;
  /** The child's one result line arrives here. */
  result: net.Socket;
  out: net.Socket;
  err: net.Socket;
}

/**
 * Opens Node's ends of a new child's pipes (the fd numbers come in the zygote's report) through
 * /proc: a pipe cannot carry descriptors, and each open gives Node a file description of its own,
 * so making it non-blocking leaves the child's blocking. Undefined when the child already died.
 *
 * `owner`: the host uid of every child of a zygote whose reports are not trusted (a preloading
 * one, docs/security.md, "Preloading"). Node is root and would open any process's descriptors:
 * a pid whose uids are not all `owner`, before and after the opens, is no child of that zygote,
 * and only pipes are taken (the reopen is Node's, with Node's rights).
 */
export function openChild(pid: number, fds: readonly number[], owner?: number): Child | undefined {
  if (owner !== undefined && !ownedBy(pid, owner)) return undefined;
  const opened: number[] = [];
  const open = (fd: number | undefined, mode: number): number => {
    const n = openSync(`/proc/${pid}/fd/${fd}`, mode | constants.O_NONBLOCK);
    opened.push(n);
    if (owner !== undefined && !fstatSync(n).isFIFO()) throw new Error("not a pipe");
    return n;
  };
  try {
    const [task, result, out, err] = fds;
    const w = open(task, constants.O_WRONLY);
    const r = [result, out, err].map((fd) => open(fd, constants.O_RDONLY));
    if (owner !== undefined && !ownedBy(pid, owner)) throw new Error("another process's pid");
    // Errors (EPIPE, a reset) only ever mean the child died: its exit report says how.
    const reader = (fd: number | undefined) =>
      new net.Socket({ fd: fd as number, readable: true, writable: false }).on("error", () => {});
    return {
      pid,
      task: new net.Socket({ fd: w, readable: false, writable: true }).on("error", () => {}),
      result: reader(r[0]),
      out: reader(r[1]),
      err: reader(r[2]),
    };
  } catch {
    for (const n of opened) closeSync(n);
    return undefined; // gone already: its exit report follows
  }
}

/** Whether process `pid` has `uid` as its real, effective, saved and filesystem uid. */
function ownedBy(pid: number, uid: number): boolean {
  try {
    const status = readFileSync(`/proc/${pid}/status`, "latin1");
    const ids = /^Uid:\s+(\d+)\s+(\d+)\s+(\d+)\s+(\d+)$/m.exec(status);
    return ids?.slice(1).every((id) => Number(id) === uid) === true;
  } catch {
    return false; // gone
  }
}

/** Closes Node's ends of a child's pipes. */
export function destroy(c: Child): void {
  c.task.destroy();
  c.result.destroy();
  c.out.destroy();
  c.err.destroy();
}

/** Kills a child's process group (its pid is the group's id), if it is still there. */
export function killGroup(pid: number): void {
  try {
    process.kill(-pid, "SIGKILL");
  } catch {
    // already gone
  }
}
