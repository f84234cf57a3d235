import assert from "node:assert/strict";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { after, before, describe, it } from "node:test";
import { openSqlite } from "../../src/store/sqlite-driver.ts";

describe("WAL checkpoints on a worker thread", () => {
  let dir: string;
  before(() => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), "sluice-checkpoint-"));
  });
  after(() => fs.rmSync(dir, { recursive: true, force: true }));

  it("the main connection never checkpoints, yet commits reach the database file", async () => {
    const file = path.join(dir, "a.db");
    const { db, raw } = openSqlite(file);
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
      const deadline = Date.now() + 5000;
      while (fs.statSync(file).size <= sizeBefore && Date.now() < deadline) {
        await new Promise((r) => setTimeout(r, 50));
      }
      assert.ok(fs.statSync(file).size > sizeBefore + 500 * 1000, "the worker checkpointed");
    } finally {
      db.close();
    }
  });
});
