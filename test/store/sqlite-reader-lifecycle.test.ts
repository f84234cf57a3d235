import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { DatabaseSync } from "node:sqlite";
import { after, before, describe, it } from "node:test";
import { openStore } from "../../src/store/open-store.ts";
import { createSqliteReader } from "../../src/store/sqlite-reader.ts";
import type { Scope } from "../../src/store/types.ts";
import { openFilesUnder } from "../helpers/open-files.ts";
import { pollUntil, within } from "../helpers/wait.ts";

/**
 * The reading thread of the SQLite store (docs/security.md, "Monitoring reads") over its life: a
 * close that waits for the thread whatever else keeps the process going, a thread that ends with
 * a read under way, and the file closed before the store says it is.
 */
const A: Scope = { app: "app1", space: "space1" };
const OPEN_STORE = new URL("../../src/store/open-store.ts", import.meta.url).href;

/** Runs an ES module script in a Node process of its own; its exit code and output. */
function runScript(dir: string, source: string): Promise<{ code: number | null; out: string }> {
  const script = path.join(dir, "script.mjs");
  fs.writeFileSync(script, source);
  return new Promise((resolve) => {
    execFile(process.execPath, [script], { timeout: 60_000 }, (err, stdout, stderr) =>
      resolve({ code: err ? ((err.code as number | null) ?? null) : 0, out: stdout + stderr }),
    );
  });
}

describe("the SQLite store's reading thread over its life", () => {
  let dir: string;
  before(() => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), "sluice-reader-life-"));
  });
  after(() => fs.rmSync(dir, { recursive: true, force: true }));

  // stop() refs the thread so that a process ending waits for its connection to close; the
  // answer of the read under way must not unref it again.
  it("a close awaited while a read is under way completes in a process with nothing else to do", async () => {
    const data = path.join(dir, "exit");
    const { code, out } = await runScript(
      dir,
      `
      import { openStore } from ${JSON.stringify(OPEN_STORE)};
      const store = await openStore({ dataDir: ${JSON.stringify(data)} });
      const read = store.monitorFlows({ app: "a", space: "s" });
      await store.close();
      await read;
      console.log("closed");
    `,
    );
    assert.match(out, /closed/, `exit code ${code}: ${out}`);
    assert.equal(code, 0);
  });

  it("close() leaves no descriptor of the database open, the reading thread's included", async () => {
    const data = path.join(dir, "fds");
    const store = await openStore({ dataDir: data });
    await store.monitorFlows(A);
    const file = path.join(data, "sluice.db");
    await store.close();
    assert.deepEqual(openFilesUnder(file), []);
    const next = new DatabaseSync(file);
    try {
      next.exec("PRAGMA journal_mode = WAL; BEGIN IMMEDIATE; COMMIT;");
    } finally {
      next.close();
    }
  });

  // Loading the thread took a new service's first list 250 ms (540 under load): a process that
  // serves the API starts it with the store. Three connections hold the file then: the service's,
  // the checkpointer's (sqlite-checkpointer.ts) and the reader's.
  it("warmReads starts the reading thread, connection open, before the first read; without it, the first read does", async () => {
    const opened = (f: string) => openFilesUnder(f).filter((p) => p === f).length;
    const warm = path.join(dir, "warm");
    const store = await openStore({ dataDir: warm, warmReads: true });
    try {
      const db = path.join(warm, "sluice.db");
      await pollUntil(
        () => opened(db),
        (n) => n === 3,
        "the reader's connection open",
      );
      assert.deepEqual(await store.monitorFlows(A), []);
      assert.equal(opened(db), 3, "the warm thread answered: no second one");
    } finally {
      await store.close();
    }
    const cold = path.join(dir, "cold");
    const lazy = await openStore({ dataDir: cold });
    try {
      const db = path.join(cold, "sluice.db");
      await pollUntil(
        () => opened(db),
        (n) => n === 2,
        "the checkpointer's connection open",
      );
      assert.equal(opened(db), 2, "no reader yet");
      await lazy.monitorFlows(A);
      assert.equal(opened(db), 3);
    } finally {
      await lazy.close();
    }
  });

  it("a thread that cannot open the file fails the read under way and those after it; one that can, answers", async () => {
    const data = path.join(dir, "late");
    const file = path.join(data, "sluice.db");
    const reader = createSqliteReader(file);
    try {
      await within(
        assert.rejects(reader.monitorFlows(A), /monitoring read failed/),
        30_000,
        "the first read failed",
      );
      await within(
        assert.rejects(reader.listFlows(A), /monitoring read failed/),
        30_000,
        "the second read failed",
      );
      const store = await openStore({ dataDir: data });
      try {
        assert.deepEqual(await within(reader.monitorFlows(A), 30_000, "a read answered"), []);
      } finally {
        await store.close();
      }
    } finally {
      await reader.stop();
    }
  });
});
