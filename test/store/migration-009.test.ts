import assert from "node:assert/strict";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { after, describe, it } from "node:test";
import { Kysely, PostgresDialect, SqliteDialect, sql } from "kysely";
import pg from "pg";
import { newId } from "../../src/ids.ts";
import { migrate } from "../../src/store/migrate.ts";
import { type OpenedStore, openStore } from "../../src/store/open-store.ts";
import { openSqlite } from "../../src/store/sqlite-driver.ts";
import { startPostgres } from "../helpers/pg.ts";
import { newRun } from "../helpers/runs.ts";

/**
 * Migrations 008 (revisions) and 009 (re-run link) apply in name order on a fresh store, on one
 * written before either, and on one that has 008 only (docs/operations.md, "Migrations").
 */
const ALL = [
  "001-init",
  "002-monitor",
  "003-nodes",
  "004-schedules",
  "005-search-columns",
  "006-monitor-counters",
  "007-monitor-trigram",
  "008-revisions",
  "009-rerun-link",
  "010-idempotency",
  "011-secrets",
  "012-webhooks",
  "013-run-limits",
  "014-script-envs",
  "016-audit",
  "017-artifacts",
  "018-search-finished-runs",
  "019-partial-parent-index",
  "020-revision-pins",
  "021-notify-owed",
  "022-release-crons",
  "023-stored-bytes",
  "024-files-removed",
  "025-stored-created-bytes",
];

async function checkLatest(store: OpenedStore): Promise<void> {
  const applied = await sql<{
    name: string;
  }>`select name from kysely_migration order by name`.execute(store.db);
  assert.deepEqual(
    applied.rows.map((r) => r.name),
    ALL,
  );
  // 008's table and 009's columns are both there.
  const versions = await sql<{ n: number }>`select count(*) as n from script_versions`.execute(
    store.db,
  );
  assert.equal(Number(versions.rows[0]?.n), 0);
  const scope = { app: "a", space: "s" };
  const id = newId();
  await store.insertRun(
    newRun({
      id,
      scope,
      elementName: "score",
      version: "1",
      createTime: 1000,
      rerunOf: { runId: "r-old", kind: "rerun" },
    }),
  );
  assert.deepEqual((await store.getRun(scope, id))?.rerunOf, { runId: "r-old", kind: "rerun" });
}

describe("migrations 008 and 009 apply in order", () => {
  const dirs: string[] = [];
  after(() => {
    for (const d of dirs) fs.rmSync(d, { recursive: true, force: true });
  });
  const tmp = () => {
    const d = fs.mkdtempSync(path.join(os.tmpdir(), "sluice-m009-"));
    dirs.push(d);
    return d;
  };

  for (const upTo of [null, "007-monitor-trigram", "008-revisions"]) {
    const from = upTo === null ? "a fresh store" : `a store at ${upTo}`;

    it(`SQLite: ${from}`, async () => {
      const dataDir = tmp();
      if (upTo) {
        const sqlite = openSqlite(path.join(dataDir, "sluice.db"));
        const db = new Kysely<unknown>({ dialect: new SqliteDialect({ database: sqlite.db }) });
        await migrate(db, "sqlite", upTo);
        await db.destroy();
        await sqlite.close();
      }
      const store = await openStore({ dataDir });
      try {
        await checkLatest(store);
      } finally {
        await store.close();
      }
    });

    it(`PostgreSQL: ${from}`, async () => {
      const url = await (await startPostgres()).createDatabase();
      if (upTo) {
        const db = new Kysely<unknown>({
          dialect: new PostgresDialect({ pool: new pg.Pool({ connectionString: url, max: 2 }) }),
        });
        await migrate(db, "postgres", upTo);
        await db.destroy();
      }
      const store = await openStore({ databaseUrl: url, dataDir: tmp() });
      try {
        await checkLatest(store);
      } finally {
        await store.close();
      }
    });
  }
});
