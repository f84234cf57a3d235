import assert from "node:assert/strict";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { after, describe, it } from "node:test";
import { Kysely, PostgresDialect, SqliteDialect, sql } from "kysely";
import pg from "pg";
import { ErrorCode, SluiceError } from "../../src/errors.ts";
import { migrate } from "../../src/store/migrate.ts";
import { openStore } from "../../src/store/open-store.ts";
import { openSqlite } from "../../src/store/sqlite-driver.ts";
import { startPostgres } from "../helpers/pg.ts";

/**
 * Migration 022 (docs/scheduler.md, "Apps share the scheduler"): `elements.release_crons` is
 * filled from the releases stored before it, so the first activate after an upgrade counts the
 * schedules the app already has. Both dialects.
 */
const SCOPE = { app: "a", space: "s" };
const crons = (n: number) =>
  JSON.stringify({
    triggers: [
      { type: "manual" },
      ...Array.from({ length: n }, (_, i) => ({
        type: "cron",
        name: `t${i}`,
        crontab: "0 0 1 1 *",
      })),
    ],
  });

/** At 020: flow 1 APPROVED with 3 cron triggers in its release (revision 2), flow 2 DRAFT with 2. */
async function seed(db: Kysely<unknown>): Promise<void> {
  await sql`insert into folders (id, app, space, path, created_at)
    values ('f0', 'a', 's', '/', 0)`.execute(db);
  for (const [id, status, release] of [
    [1, "APPROVED", 2],
    [2, "DRAFT", 1],
  ] as const)
    await sql`insert into elements (id, app, space, folder_id, type, name, created_at, updated_at,
        status, release_version)
      values (${id}, 'a', 's', 'f0', 'DPL', ${`f${id}`}, 0, 0, ${status}, ${release})`.execute(db);
  for (const [id, version, n] of [
    [1, 1, 9],
    [1, 2, 3],
    [2, 1, 2],
  ] as const)
    await sql`insert into flow_revisions (element_id, version, name, flow, configure, created_at,
        released_at) values (${id}, ${version}, 'r', '{}', ${crons(n)}, 0, 0)`.execute(db);
}

describe("migration 022 fills elements.release_crons from the releases stored", () => {
  const dirs: string[] = [];
  after(() => {
    for (const d of dirs) fs.rmSync(d, { recursive: true, force: true });
  });

  for (const dialect of ["sqlite", "postgres"] as const) {
    it(dialect, async () => {
      const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), "sluice-m022-"));
      dirs.push(dataDir);
      let url: string | undefined;
      if (dialect === "sqlite") {
        const sqlite = openSqlite(path.join(dataDir, "sluice.db"));
        const db = new Kysely<unknown>({ dialect: new SqliteDialect({ database: sqlite.db }) });
        await migrate(db, "sqlite", "020-revision-pins");
        await seed(db);
        await db.destroy();
        await sqlite.close();
      } else {
        url = await (await startPostgres()).createDatabase();
        const db = new Kysely<unknown>({
          dialect: new PostgresDialect({ pool: new pg.Pool({ connectionString: url, max: 2 }) }),
        });
        await migrate(db, "postgres", "020-revision-pins");
        await seed(db);
        await db.destroy();
      }
      const store = await openStore({ databaseUrl: url, dataDir });
      try {
        const rows = await sql<{ id: number; release_crons: number }>`
          select id, release_crons from elements order by id`.execute(store.db);
        assert.deepEqual(
          rows.rows.map((r) => [Number(r.id), Number(r.release_crons)]),
          [
            [1, 3],
            [2, 2],
          ],
        );
        // With 4 schedules allowed, f1's 3 leave no room for f2's 2.
        const err = await store
          .changeRelease({
            elementId: "2",
            action: "ACTIVATE",
            status: "APPROVED",
            version: 1,
            pins: null,
            user: null,
            now: 1,
            bounds: { elements: 0, schedules: 4 },
          })
          .catch((e: unknown) => e);
        assert.ok(err instanceof SluiceError && err.code === ErrorCode.SCHEDULE_LIMIT, String(err));
        assert.equal((await store.elementById(SCOPE, "2"))?.status, "DRAFT");
      } finally {
        await store.close();
      }
    });
  }
});
