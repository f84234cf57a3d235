import fs from "node:fs";
import path from "node:path";
import { StartupError } from "../errors.ts";

/**
 * Sandbox uids must not be shared by two Sluice processes on one host: a task's uid is its
 * process-count limit and its file owner, and a finished task's uid is swept (every process it
 * owns is killed). Each runner therefore claims a block of the configured range with an
 * exclusive lock file named after its first uid, holding its pid and its size; a block whose
 * owner is gone is taken over. Block sizes follow the configuration (SCRIPT_CONCURRENCY,
 * preloading), so two processes of one host may cut the range differently (a rolling upgrade):
 * a block that overlaps a live one of another size is not taken either.
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
    throw new StartupError(
      `config: SCRIPT_UID_COUNT ${range.uidCount} is smaller than one block of ${blockSize} uids ` +
        "(max(256, 4 × SCRIPT_CONCURRENCY), plus the preloading zygotes' slices: docs/operations.md); " +
        "raise SCRIPT_UID_COUNT or lower SCRIPT_CONCURRENCY",
    );
  for (let b = 0; b < blocks; b++) {
    const base = range.uidBase + b * blockSize;
    const lock = path.join(lockDir, `${base}`);
    if (heldHere.has(lock) || overlapsLive(lockDir, base, blockSize, lock)) continue;
    if (!take(lock, blockSize)) continue;
    // Another process may have taken an overlapping block of another size meanwhile, above or
    // below: give way to any. Of two, the one that locked last sees the other (both may, and both
    // move on); letting only the upper one give way kept both when the lower locked last.
    if (overlapsLive(lockDir, base, blockSize, lock)) {
      fs.rmSync(lock, { force: true });
      continue;
    }
    heldHere.add(lock);
    return {
      base,
      count: blockSize,
      release: () => {
        heldHere.delete(lock);
        if (readLock(lock)?.pid === process.pid) fs.rmSync(lock, { force: true });
      },
    };
  }
  throw new StartupError(
    `all ${blocks} sandbox uid blocks of ${blockSize} are held by running Sluice processes; raise SCRIPT_UID_COUNT`,
  );
}

/**
 * Whether a live block other than `self` overlaps [base, base + size). A lock without a size (an
 * older Sluice's) was a block of 256.
 */
function overlapsLive(lockDir: string, base: number, size: number, self: string): boolean {
  for (const name of fs.readdirSync(lockDir)) {
    const other = Number(name);
    const lock = path.join(lockDir, name);
    if (!Number.isInteger(other) || lock === self) continue;
    const owner = readLock(lock);
    if (!owner) continue;
    // This process's own locks are live while one of its runners holds them.
    if (owner.pid === process.pid ? !heldHere.has(lock) : !alive(owner.pid)) continue;
    if (other < base + size && base < other + owner.size) return true;
  }
  return false;
}

function take(lock: string, size: number): boolean {
  for (let attempt = 0; attempt < 2; attempt++) {
    try {
      fs.writeFileSync(lock, `${process.pid} ${size}`, { flag: "wx", mode: 0o600 });
      return true;
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== "EEXIST") throw err;
      const owner = readLock(lock)?.pid;
      if (owner !== undefined && owner !== process.pid && alive(owner)) return false;
      // The owner died without releasing (or is this process, restarted runner): free again.
      fs.rmSync(lock, { force: true });
    }
  }
  return false;
}

function readLock(lock: string): { pid: number; size: number } | undefined {
  try {
    const [pid, size] = fs.readFileSync(lock, "utf8").trim().split(/\s+/).map(Number);
    if (!Number.isInteger(pid) || (pid as number) <= 0) return undefined;
    return { pid: pid as number, size: Number.isInteger(size) ? (size as number) : 256 };
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
