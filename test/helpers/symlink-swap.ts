import { type ChildProcess, spawn } from "node:child_process";

/**
 * What an attacker holding a descriptor inside a kept run directory does (a preloading zygote
 * whose slice gave the directory its group keeps one: its packages' code can open it while the
 * group is its own): swap, atomically and for ever, a subdirectory with a symlink to a host
 * directory, so that Node, root, walking the tree by path, is sent outside.
 */
const SWAPPER = `
import ctypes, os, sys
libc = ctypes.CDLL(None, use_errno=True)
d = sys.argv[1]
a, b = os.path.join(d, "sub").encode(), os.path.join(d, "lnk").encode()
print("go", flush=True)
while True:
    libc.renameat2(-100, a, -100, b, 2)  # RENAME_EXCHANGE
`;

/** Starts exchanging `dir/sub` and `dir/lnk`; resolves once it swaps. Kill it when done. */
export async function startSwapper(dir: string): Promise<ChildProcess> {
  const swapper = spawn("/usr/bin/python3", ["-c", SWAPPER, dir], {
    stdio: ["ignore", "pipe", "inherit"],
  });
  await new Promise((resolve, reject) => {
    swapper.stdout.once("data", resolve);
    swapper.once("error", reject);
  });
  return swapper;
}
