import fs from "node:fs";
import path from "node:path";
import { pollUntil } from "./wait.ts";

/**
 * A flow script node's Python that waits for a file named `go` in its run's working directory
 * (at most a minute), so a test can watch the run while it is certainly still running, then let
 * it finish with `release`: no sleep of a guessed length on either side.
 */
export function gatedScript(before: string[], after: string[]): string {
  return [
    "import os, sys, time",
    "def main(p):",
    ...before.map((l) => `    ${l}`),
    "    for _ in range(1200):",
    "        if os.path.exists('go'):",
    "            break",
    "        time.sleep(0.05)",
    ...after.map((l) => `    ${l}`),
    "    return p",
  ].join("\n");
}

/** Lets a gated run finish: writes `go` once its working directory (on `dataDir`'s node) exists. */
export async function release(dataDir: string, runId: string): Promise<void> {
  const dir = path.join(dataDir, "tasks", runId);
  await pollUntil(
    () => fs.existsSync(dir),
    (there) => there,
    `the working directory of ${runId}`,
    { ms: 60_000 },
  );
  fs.writeFileSync(path.join(dir, "go"), "");
}
