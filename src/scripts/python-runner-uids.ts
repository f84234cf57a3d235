import type { Config } from "../config.ts";
import { type Logger, type SandboxKind, userNamespaceRefused } from "./python-runner-sandbox.ts";
import type { Runner } from "./python-runner-state.ts";
import type { WorkDirs } from "./python-runner-workdir.ts";
import { claimUidBlock, killUidBlock, uidBlockInUse } from "./uid-blocks.ts";
import { sliceSize, type UidSlice, UidSlices } from "./uid-slices.ts";

type Sandbox = Exclude<SandboxKind, "refused">;
type Uids = Runner["uids"];

/**
 * This process's uid block, laid out: the tasks' uids first, then the slices of preloading
 * zygotes, then the syntax checks' uids, one per concurrent check, never a task's
 * (docs/security.md, "Preloading").
 */
export interface UidLayout {
  block: Uids;
  tasks: { base: number; count: number };
  /** Undefined without a sandbox (checks run as the service). */
  checks: number[] | undefined;
  /** Undefined when nothing is preloaded (or the kernel refuses a zygote a user namespace). */
  slices: UidSlices | undefined;
}

export function layOutUids(python: Config["python"], sandbox: Sandbox, logger: Logger): UidLayout {
  // Preloading zygotes each get a slice of the block (docs/security.md, "Preloading").
  const preloaders = sandbox === "bwrap" && python.envs.preload ? python.envs.zygotes : 0;
  const block = claimUids(python, sandbox, preloaders, logger);
  const checkUids = sandbox !== "none" ? python.check.concurrency : 0;
  const sliced = preloaders * sliceSize(python.concurrency);
  const slices =
    preloaders > 0
      ? preloadSlices(python, block.base + block.count - checkUids - sliced, preloaders, logger)
      : undefined;
  return {
    block,
    tasks: { base: block.base, count: block.count - checkUids - sliced },
    checks: sandbox !== "none" ? lastUids(block, checkUids) : undefined,
    slices,
  };
}

/**
 * A stopped preloading zygote's slice, before another zygote gets it: whatever its packages'
 * code left running is killed, decided here, outside it, and its tasks' spare directories are
 * made anew (docs/security.md, "Preloading").
 */
export function retireSlice(dirs: WorkDirs, slice: UidSlice): void {
  const block = { base: slice.outer, count: slice.count + 1 };
  killUidBlock(block);
  dirs.retireRange(slice, !uidBlockInUse(block));
}

/**
 * The slices of preloading zygotes, or undefined when the kernel refuses this sandbox a user
 * namespace: asked here, of a zygote that imports nothing, so no package's code decides it.
 */
function preloadSlices(
  python: Config["python"],
  start: number,
  preloaders: number,
  logger: Logger,
): UidSlices | undefined {
  const slices = new UidSlices(start, preloaders, sliceSize(python.concurrency));
  const first = slices.take();
  const refused = first && userNamespaceRefused(python, first);
  if (first) slices.give(first);
  if (!refused) return slices;
  logger.warn(
    { problem: refused },
    "a zygote cannot have a user namespace of its own: environments are not preloaded on this node",
  );
  return undefined;
}

/** Uids of this process only, so that other Sluice processes on the host never share them. */
function claimUids(
  python: Config["python"],
  sandbox: Sandbox,
  preloaders: number,
  logger: Logger,
): Uids {
  if (sandbox === "none")
    return { base: python.uidBase, count: python.uidCount, release: () => {} };
  const size = Math.max(256, python.concurrency * 4) + preloaders * sliceSize(python.concurrency);
  const uids = claimUidBlock(python, size);
  let killed: number;
  try {
    killed = killUidBlock(uids);
  } catch (err) {
    // Held, the block would be skipped by this process's next runner; whoever claims it next
    // kills its leftovers first, as here.
    uids.release();
    throw err;
  }
  if (killed > 0)
    logger.warn(
      { killed, uidBase: uids.base },
      "killed task processes left by an earlier run of this uid block",
    );
  return uids;
}

function lastUids(uids: Uids, n: number): number[] {
  return Array.from({ length: n }, (_, i) => uids.base + uids.count - n + i);
}
