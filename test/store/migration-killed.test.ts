import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { DatabaseSync } from "node:sqlite";
import { after, describe, it } from "node:test";
import { Kysely, PostgresDialect, SqliteDialect, sql } from "kysely";
import pg from "pg";
import { migrate } from "../../src/store/migrate.ts";
import { openSqlite } from "../../src/store/sqlite-driver.ts";
import { startPostgres } from "../helpers/pg.ts";
import { BIN, freePort, killHard, startProcess } from "../helpers/process.ts";
import { TEST_MODE } from "../helpers/server.ts";
import { pollUntil } from "../helpers/wait.ts";

/**
 * An upgrade killed in the middle of a migration (docs/operations.md, "Migrations"): the next
 * start applies it whole, in both stores. Migration 023 adds three columns, then fills them from
 * every stored run; the kill lands while it fills.
 */
const RUNS = 300_000;

/** RUNS finished runs of one flow; the numbers 1..RUNS as each dialect makes them. */
async function seed(db: Kysely<unknown>, dialect: "sqlite" | "postgres"): Promise<void> {
  await sql`insert into folders (id, app, space, path, created_at)
    values ('f0', 'a', 's', '/', 0)`.execute(db);
  await sql`insert into elements (id, app, space, folder_id, type, name, created_at, updated_at,
      status, release_version) values (1, 'a', 's', 'f0', 'DPL', 'f1', 0, 0, 'DRAFT', null)`.execute(
    db,
  );
  const numbers =
    dialect === "postgres"
      ? sql`(select i from generate_series(1, ${RUNS}) i) n`
      : sql`(with recursive n(i) as (select 1 union all select i + 1 from n where i < ${RUNS})
          select i from n) n`;
  await sql`insert into runs (id, app, space, element_id, element_type, element_name, folder_id,
      trigger_type, status, run_param, create_time, end_time, result)
    select 'r' || i, 'a', 's', 1, 'DPL', 'f1', 'f0', 'MANUAL', 'SUCCESS', '{"p":1}', i, i,
      '{"result":"' || i || '"}' from ${numbers}`.execute(db);
}

describe(`an upgrade killed in the middle of a migration (${TEST_MODE})`, () => {
  const dirs: string[] = [];
  after(() => {
    for (const d of dirs) fs.rmSync(d, { recursive: true, force: true });
  });

  it("is applied whole at the next start", async () => {
    const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), "sluice-migration-killed-"));
    dirs.push(dataDir);
    const env: Record<string, string> = { DATA_DIR: dataDir };
    // What the killed start had done when killed, read from outside (another connection).
    let midway: () => Promise<boolean>;
    // The migrations recorded, and what 023's last statements fill.
    let applied: () => Promise<{ names: string[]; stats: unknown[] }>;
    const file = path.join(dataDir, "sluice.db");
    if (TEST_MODE === "embedded") {
      const sqlite = openSqlite(file);
      const db = new Kysely<unknown>({ dialect: new SqliteDialect({ database: sqlite.db }) });
      await migrate(db, "sqlite", "022-release-crons");
      await seed(db, "sqlite");
      await db.destroy();
      await sqlite.close();
      // A write is under way (the migration's: nothing else writes at start), taking a while.
      midway = async () => {
        const peek = new DatabaseSync(file);
        try {
          peek.exec("begin immediate");
          peek.exec("rollback");
          return false;
        } catch {
          return true; // SQLITE_BUSY: the service holds the write lock
        } finally {
          peek.close();
        }
      };
      applied = async () => {
        const peek = new DatabaseSync(file, { readOnly: true });
        try {
          const names = peek
            .prepare("select name from kysely_migration")
            .all()
            .map((r) => r.name);
          // Read only once 023 is recorded (before it, the columns are not there).
          const stats = names.includes("023-stored-bytes")
            ? peek.prepare("select app, bytes from element_run_stats").all()
            : [];
          return { names: names.map(String), stats: stats.map((r) => ({ ...r })) };
        } finally {
          peek.close();
        }
      };
    } else {
      const url = await (await startPostgres()).createDatabase();
      env.DATABASE_URL = url;
      const pool = new pg.Pool({ connectionString: url, max: 2 });
      const db = new Kysely<unknown>({ dialect: new PostgresDialect({ pool }) });
      await migrate(db, "postgres", "022-release-crons");
      await seed(db, "postgres");
      await db.destroy();
      const peek = new pg.Pool({ connectionString: url, max: 1 });
      after(() => peek.end());
      applied = async () => {
        const names = (await peek.query("select name from kysely_migration")).rows.map(
          (r) => r.name,
        );
        const stats = names.includes("023-stored-bytes")
          ? (await peek.query("select app, bytes::int as bytes from element_run_stats")).rows
          : [];
        return { names, stats };
      };
      // The fill is under way: its statement is running.
      midway = async () =>
        (
          await peek.query(
            "select 1 from pg_stat_activity where query like 'insert into run_status_counts%' and state = 'active'",
          )
        ).rowCount === 1;
    }

    const port = String(await freePort());
    const child = spawn(process.execPath, [BIN, "serve"], {
      env: { ...process.env, LOG_LEVEL: "warn", ...env, PORT: port, HOST: "127.0.0.1" },
      stdio: "ignore",
    });
    try {
      await pollUntil(midway, (v) => v, "the migration's fill under way", { ms: 60_000 });
    } finally {
      await killHard(child);
    }

    const before = await applied();
    assert.ok(!before.names.includes("023-stored-bytes"), "the kill came after the migration");

    const proc = await startProcess(env);
    try {
      const after = await applied();
      assert.ok(after.names.includes("023-stored-bytes"), after.names.join());
      // Filled from every stored run: each run's parameter counted once.
      assert.deepEqual(after.stats, [{ app: "a", bytes: RUNS * '{"p":1}'.length }]);
    } finally {
      await killHard(proc.child);
    }
  });
});
