import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import {
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  symlinkSync,
  writeFileSync,
} from "node:fs";
import os from "node:os";
import path from "node:path";
import { after, describe, it } from "node:test";
import { cleanupAtRunEnd, createFileSweeper } from "../../src/runs/file-cleanup.ts";
import { createRetention } from "../../src/runs/retention.ts";
import type { RetentionStore } from "../../src/store/retention-store.ts";
import type { Store } from "../../src/store/types.ts";
import { startSwapper } from "../helpers/symlink-swap.ts";
import { createFakeClock } from "../scheduler/fake-clock.ts";

/**
 * Every removal of a flow run's directory by the service (docs/security.md, "Disk"): the file
 * sweeper's, retention's and `afterRun`'s at the run's end. The directory is the run's, written
 * by its tasks, and a process may still hold a descriptor inside it after the run ended (a
 * preloading zygote): a link planted in it, or a subdirectory swapped for one while Node removes
 * it, must never take the removal outside it.
 */

const DAY = 86_400_000;
const NAMES = Array.from({ length: 40 }, (_, i) => `f${i}`);
const quiet = { info() {}, error() {} };

const made: string[] = [];
after(() => {
  // rm(1) removes any depth; Node's rmSync fails past PATH_MAX (the deep test's leftovers).
  for (const dir of made) execFileSync("rm", ["-rf", dir]);
});

/**
 * What a task can write in its run's directory: directories nested `depth` deep, by relative
 * paths (no path is ever longer than a name), a file at the bottom.
 */
const NEST = `
import os, sys
os.chdir(sys.argv[1])
for _ in range(int(sys.argv[2])):
    os.mkdir("d"); os.chdir("d")
open("leaf", "w").write("run")
`;

/** Runs `fn` with this process allowed `room` more open descriptors than it holds now. */
async function withFewDescriptors<T>(room: number, fn: () => Promise<T>): Promise<T> {
  const limit = readdirSync("/proc/self/fd").length + room;
  const set = (soft: string) =>
    execFileSync("prlimit", [`--pid=${process.pid}`, `--nofile=${soft}:`]);
  const before = /^Max open files\s+(\d+)/m.exec(readFileSync("/proc/self/limits", "utf8"))?.[1];
  assert.ok(before);
  set(String(limit));
  try {
    return await fn();
  } finally {
    set(before);
  }
}

/** A data directory and a host directory of root's files, fresh for one test. */
function place() {
  const dataDir = mkdtempSync(path.join(os.tmpdir(), "sluice-run-dir-removal-"));
  const outside = mkdtempSync(path.join(os.tmpdir(), "sluice-host-"));
  made.push(dataDir, outside);
  for (const n of NAMES) writeFileSync(path.join(outside, n), "host");
  return {
    dataDir,
    gone: () => NAMES.filter((n) => !existsSync(path.join(outside, n))),
    /** A kept run directory: `sub/` with files named as the host's, and `lnk` to the host's. */
    keptDir(runId: string): string {
      const dir = path.join(dataDir, "tasks", runId);
      mkdirSync(path.join(dir, "sub"), { recursive: true });
      for (const n of NAMES) writeFileSync(path.join(dir, "sub", n), "run");
      symlinkSync(outside, path.join(dir, "lnk"));
      return dir;
    },
  };
}

/** The three removers, each told to remove the directory of `runId`. */
const removers: Record<string, (dataDir: string, runId: string) => Promise<unknown>> = {
  async "the file sweeper"(dataDir) {
    // A deleted run's directory: due FILE_RETENTION_DAYS after its last change.
    const store = {
      getRun: async () => undefined,
      pruneErrorHandlerResults: async () => 0,
    } as unknown as Store;
    const sweeper = createFileSweeper({
      store,
      clock: createFakeClock(Date.now() + 8 * DAY),
      logger: quiet,
      config: { dataDir, fileRetentionDays: 7, fileSweepMs: 0 },
    });
    return sweeper.sweep();
  },
  async retention(dataDir, runId) {
    let purged = false;
    const store: RetentionStore = {
      elements: async () => [
        {
          elementId: "1",
          scope: { app: "a", space: "s" },
          type: "DPL",
          name: "flow",
          folderPath: "/",
          updatedAt: 1,
          configureJson: "{}",
        },
      ],
      scriptSource: async () => undefined,
      async purgeBatch() {
        if (purged) return [];
        purged = true;
        return [runId];
      },
      countExpired: async () => 0,
    };
    const retention = createRetention({
      store,
      clock: createFakeClock(Date.now()),
      logger: quiet,
      config: { days: 1, batch: 10, sweepMs: 0, dataDir },
    });
    return retention.pass();
  },
  "afterRun at the run's end": (dataDir, runId) =>
    cleanupAtRunEnd(dataDir, runId, { type: "afterRun" }),
};

for (const [who, remove] of Object.entries(removers)) {
  describe(`${who}'s removal of a run directory`, () => {
    it("removes a link planted in it, never what it points to", async () => {
      const p = place();
      const dir = p.keptDir("planted");
      await remove(p.dataDir, "planted");
      assert.equal(existsSync(dir), false, "the run's directory is gone");
      assert.deepEqual(p.gone(), []);
    });

    it("removes a directory nested deeper than the process may hold descriptors", async () => {
      const p = place();
      const dir = path.join(p.dataDir, "tasks", "deep");
      mkdirSync(dir, { recursive: true });
      execFileSync("/usr/bin/python3", ["-c", NEST, dir, "3000"]);
      // A walk holding a descriptor per level ran out of them 256 levels down, left the whole
      // tree for ever (every pass failed again), and meanwhile left the service none.
      await withFewDescriptors(256, () => remove(p.dataDir, "deep"));
      assert.equal(existsSync(dir), false, "the run's directory is gone");
    });

    it("never removes a file outside it, whatever a process inside swaps meanwhile", async () => {
      const p = place();
      for (let i = 0; i < 40 && p.gone().length === 0; i++) {
        const swapper = await startSwapper(p.keptDir(`swapped-${i}`));
        try {
          // It may fail (the tree changes under it); it must not reach outside.
          await remove(p.dataDir, `swapped-${i}`).catch(() => {});
        } finally {
          swapper.kill("SIGKILL");
        }
      }
      assert.deepEqual(p.gone(), []);
    });
  });
}
