import assert from "node:assert/strict";
import fs, { readdirSync, readFileSync } from "node:fs";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { after, before, describe, test } from "node:test";
import { loadConfig } from "../../src/config.ts";
import { createPythonRunner } from "../../src/scripts/python-runner.ts";

const LOCKS = "/run/sluice-uid-blocks";
const quiet = { info() {}, warn() {}, error() {}, debug() {} };
const root = process.getuid?.() === 0;

/** The uid blocks this test process holds: their lock files name its pid. */
function blocksHeld(): string[] {
  let names: string[];
  try {
    names = readdirSync(LOCKS);
  } catch {
    return [];
  }
  return names.filter((name) => {
    try {
      return readFileSync(path.join(LOCKS, name), "utf8").split(/\s+/)[0] === String(process.pid);
    } catch {
      return false; // released while we looked
    }
  });
}

let dataDir: string;
before(async () => {
  dataDir = await mkdtemp(path.join(os.tmpdir(), "sluice-runner-start-"));
});
after(() => rm(dataDir, { recursive: true, force: true }));

/** By default, an interpreter that exits at once: the default zygote never reports ready. */
function failingRunner(python = "/bin/false", dir = dataDir) {
  const cfg = loadConfig({ SCRIPT_SANDBOX: "none", PYTHON: python, SCRIPT_PREFORK: "1" });
  return createPythonRunner({
    config: {
      python: cfg.python,
      limits: { outputBytes: 1000, resultBytes: 65536, maxRunS: 30 },
      dataDir: dir,
    },
    logger: quiet,
  });
}

describe("a runner whose default zygote cannot start", () => {
  test("gives back the uid block it claimed, so that a later runner of this process gets it again", {
    skip: !root && "only root switches uids: without it no block is claimed",
  }, async () => {
    assert.deepEqual(blocksHeld(), [], "no block held before");
    await assert.rejects(failingRunner(), /exited before ready/);
    assert.deepEqual(blocksHeld(), [], "the failed start holds no block");
    // Held blocks are skipped: a leaked one would push each new start to the next block.
    await assert.rejects(failingRunner(), /exited before ready/);
    assert.deepEqual(blocksHeld(), []);
  });

  test("gives it back when its work directories cannot be made", {
    skip: !root && "only root switches uids: without it no block is claimed",
  }, async () => {
    // The data directory is a file: no tasks/ can be made under it.
    const file = path.join(dataDir, "not-a-dir");
    await writeFile(file, "");
    await assert.rejects(failingRunner("/usr/bin/python3", file), /ENOTDIR/);
    assert.deepEqual(blocksHeld(), []);
  });
});

/**
 * Runs `fn` with the `nth` read of /proc's process list failing (what the kill of a block's
 * leftovers reads; EMFILE is what a process out of descriptors gets), counting from 1.
 */
async function withProcFailing<T>(nth: number, fn: () => Promise<T>): Promise<T> {
  const real = fs.readdirSync;
  let reads = 0;
  const patched = (...args: Parameters<typeof real>) => {
    if (args[0] === "/proc" && ++reads === nth)
      throw Object.assign(new Error("EMFILE: too many open files, scandir '/proc'"), {
        code: "EMFILE",
      });
    return real(...args);
  };
  fs.readdirSync = patched as typeof real;
  try {
    return await fn();
  } finally {
    fs.readdirSync = real;
  }
}

describe("a runner whose kill of its block's leftovers fails", () => {
  test("at the claim, gives the block back", {
    skip: !root && "only root switches uids: without it no block is claimed",
  }, async () => {
    await assert.rejects(
      withProcFailing(1, () => failingRunner("/usr/bin/python3")),
      /EMFILE/,
    );
    assert.deepEqual(blocksHeld(), []);
  });

  test("after its zygote failed, gives it back and says why the start failed", {
    skip: !root && "only root switches uids: without it no block is claimed",
  }, async () => {
    // The first read is the claim's; the second the failed start's kill.
    await assert.rejects(
      withProcFailing(2, () => failingRunner()),
      /exited before ready/,
    );
    assert.deepEqual(blocksHeld(), []);
  });
});

test("a runner started after failed starts in the same process holds one block and runs a task", {
  skip: !root && "only root switches uids: without it no block is claimed",
}, async () => {
  await assert.rejects(failingRunner(), /exited before ready/);
  await assert.rejects(
    withProcFailing(1, () => failingRunner("/usr/bin/python3")),
    /EMFILE/,
  );
  const cfg = loadConfig({ SCRIPT_SANDBOX: "none", SCRIPT_PREFORK: "1" });
  const runner = await createPythonRunner({
    config: {
      python: cfg.python,
      limits: { outputBytes: 1000, resultBytes: 65536, maxRunS: 30 },
      dataDir,
    },
    logger: quiet,
  });
  try {
    assert.equal(blocksHeld().length, 1, "it holds a block of its own");
    const o = await runner.run({
      taskId: "t-after",
      source: {
        name: "after",
        kind: "module",
        content: Buffer.from("def main(p):\n    return p * 7\n"),
      },
      parameter: 6,
    });
    assert.equal(o.status, "SUCCESS", JSON.stringify(o.error));
    assert.equal(o.value, 42);
  } finally {
    await runner.close();
  }
  assert.deepEqual(blocksHeld(), [], "closed, it gives the block back");
});
