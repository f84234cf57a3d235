import fs from "node:fs";
import path from "node:path";

/**
 * Sandbox uids must not be shared by two Sluice processes on one host: a task's uid is its
 * process-count limit and its file owner, and a finished task's uid is swept (every process it
 * owns is killed). Each runner therefore claims a block of the configured range with an
 * exclusive lock file naming its pid; a block whose owner is gone is taken over.
 */
export interface UidBlock {
  base: number;
  count: number;
  release(): void;
}

const LOCK_DIR = "/run/sluice-uid-blocks";
/** Blocks held by runners of this process (tests run several services in one process). */
const heldHere = new Set<string>();

export function claimUidBlock(
  range: { uidBase: number; uidCount: number },
  blockSize: number,
  lockDir = LOCK_DIR,
): UidBlock {
  fs.mkdirSync(lockDir, { recursive: true, mode: 0o700 });
  const blocks = Math.floor(range.uidCount / blockSize);
  if (blocks < 1)
    throw new Error(
      `SCRIPT_UID_COUNT ${range.uidCount} is smaller than one block of ${blockSize} uids`,
    );
  for (let b = 0; b < blocks; b++) {
    const base = range.uidBase + b * blockSize;
    const lock = path.join(lockDir, `${base}`);
    if (!heldHere.has(lock) && take(lock)) {
      heldHere.add(lock);
      return {
        base,
        count: blockSize,
        release: () => {
          heldHere.delete(lock);
          if (readPid(lock) === process.pid) fs.rmSync(lock, { force: true });
        },
      };
    }
  }
  throw new Error(
    `all ${blocks} sandbox uid blocks of ${blockSize} are held by running Sluice processes; raise SCRIPT_UID_COUNT`,
  );
}

function take(lock: string): boolean {
  for (let attempt = 0; attempt < 2; attempt++) {
    try {
      fs.writeFileSync(lock, String(process.pid), { flag: "wx", mode: 0o600 });
      return true;
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== "EEXIST") throw err;
      const owner = readPid(lock);
      if (owner !== undefined && owner !== process.pid && alive(owner)) return false;
      // The owner died without releasing (or is this process, restarted runner): free again.
      fs.rmSync(lock, { force: true });
    }
  }
  return false;
}

function readPid(lock: string): number | undefined {
  try {
    const n = Number(fs.readFileSync(lock, "utf8"));
    return Number.isInteger(n) && n > 0 ? n : undefined;
  } catch {
    return undefined;
  }
}

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === "EPERM";
  }
}

/**
 * Kills every process whose real uid is in the block: what tasks of an earlier life of this
 * block (a crashed or killed service) or of this one (at shutdown) left running. Decided and
 * done here, outside any task (docs/security.md). Repeats while it finds any, since a leftover
 * may fork while it is killed; returns how many it killed.
 */
export function killUidBlock(block: { base: number; count: number }): number {
  let killed = 0;
  for (let round = 0; round < 50; round++) {
    const found = processesOfUids(block.base, block.base + block.count);
    if (found.length === 0) return killed;
    for (const pid of found) {
      try {
        process.kill(pid, "SIGKILL");
        killed++;
      } catch {
        // gone already
      }
    }
  }
  return killed;
}

/** Whether any live process has a real uid in the block. */
export function uidBlockInUse(block: { base: number; count: number }): boolean {
  return processesOfUids(block.base, block.base + block.count).length > 0;
}

function processesOfUids(from: number, to: number): number[] {
  const pids: number[] = [];
  for (const name of fs.readdirSync("/proc")) {
    if (!/^\d+$/.test(name)) continue;
    try {
      const status = fs.readFileSync(`/proc/${name}/status`, "latin1");
      const uid = Number(/^Uid:\s+(\d+)/m.exec(status)?.[1]);
      // A zombie is dead already; its parent reaps it.
      if (uid >= from && uid < to && !/^State:\s+Z/m.test(status)) pids.push(Number(name));
    } catch {
      // exited while we looked
    }
  }
  return pids;
}
