import assert from "node:assert/strict";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { DatabaseSync } from "node:sqlite";
import { after, before, describe, it } from "node:test";
import { openSqlite } from "../../src/store/sqlite-driver.ts";
import { openFilesUnder } from "../helpers/open-files.ts";
import { pollUntil } from "../helpers/wait.ts";

/**
 * Until the worker has checkpointed: the database file grew past `size`. The worker thread tells
 * nobody when it has, so this is read by the shared poll (bounded).
 */
async function checkpointedPast(file: string, size: number): Promise<void> {
  await pollUntil(
    () => fs.statSync(file).size,
    (s) => s > size,
    "the worker checkpointed",
    { ms: 5000, everyMs: 50 },
  );
}

describe("WAL checkpoints on a worker thread", () => {
  let dir: string;
  before(() => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), "sluice-checkpoint-"));
  });
  after(() => fs.rmSync(dir, { recursive: true, force: true }));

  it("the main connection never checkpoints, yet commits reach the database file", async () => {
    const file = path.join(dir, "a.db");
    const { raw, close } = openSqlite(file);
    try {
      assert.equal(
        (raw.prepare("PRAGMA wal_autocheckpoint").get() as { wal_autocheckpoint: number })
          .wal_autocheckpoint,
        0,
      );
      raw.exec("create table t (id integer primary key, body text)");
      const sizeBefore = fs.statSync(file).size;
      const insert = raw.prepare("insert into t (body) values (?)");
      for (let i = 0; i < 500; i++) insert.run("x".repeat(2000)); // ~500 commits, ~250 pages
      // Only a checkpoint copies WAL pages into the database file; this connection does none.
      await checkpointedPast(file, sizeBefore + 500 * 1000);
    } finally {
      await close();
    }
  });

  // A restarted server opened the file while the old worker's connection was still closing and
  // got "database is locked": close() used to return with that connection open.
  it("close() resolves once no connection to the file is left, the worker's included", {
    skip: fs.existsSync("/proc/self/fd") ? false : "needs /proc/self/fd",
  }, async () => {
    const file = path.join(dir, "b.db");
    const { db, raw, close } = openSqlite(file);
    raw.exec("create table t (id integer primary key, body text)");
    const sizeBefore = fs.statSync(file).size;
    const insert = raw.prepare("insert into t (body) values (?)");
    for (let i = 0; i < 200; i++) insert.run("x".repeat(2000));
    await checkpointedPast(file, sizeBefore); // so the worker's connection is certainly open
    db.close(); // as Kysely's destroy() calls it, without awaiting
    await close();
    assert.deepEqual(openFilesUnder(file), [], "no descriptor of the database is left open");
    // The last connection to close checkpoints the WAL and removes it with the shared memory.
    assert.equal(fs.existsSync(`${file}-wal`), false, "WAL left behind");
    assert.equal(fs.existsSync(`${file}-shm`), false, "shared memory left behind");
    // A new opener's first statement runs before it could set a busy timeout.
    const next = new DatabaseSync(file);
    try {
      next.exec("PRAGMA journal_mode = WAL;");
      assert.equal((next.prepare("select count(*) as n from t").get() as { n: number }).n, 200);
    } finally {
      next.close();
    }
  });
});
