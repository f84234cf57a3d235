import assert from "node:assert/strict";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { after, describe, it } from "node:test";
import { Kysely, PostgresDialect, SqliteDialect, sql } from "kysely";
import pg from "pg";
import { migrate } from "../../src/store/migrate.ts";
import { openStore } from "../../src/store/open-store.ts";
import { openSqlite } from "../../src/store/sqlite-driver.ts";
import { startPostgres } from "../helpers/pg.ts";

/**
 * Migration 020 (docs/script-service.md, "How many versions are kept"): the pins revisions stored
 * before it (in `flow_revisions.script_pins`) become rows of `revision_pins`, so the first upload
 * past LIMIT_VERSIONS_PER_SCRIPT after an upgrade keeps the versions they pin. Both dialects.
 */
const SCOPE = { app: "a", space: "s" };

/** A store at 019 holding script `s` (versions 1 to 3) and flow `f` whose revision pins s@1. */
async function seed(db: Kysely<unknown>): Promise<void> {
  await sql`insert into folders (id, app, space, path, created_at)
    values ('f0', 'a', 's', '/', 0)`.execute(db);
  for (const [id, type] of [
    [1, "PY"],
    [2, "DPL"],
  ] as const)
    await sql`insert into elements (id, app, space, folder_id, type, name, created_at, updated_at,
        status, kind, release_version)
      values (${id}, 'a', 's', 'f0', ${type}, ${type === "PY" ? "s" : "f"}, 0, 0,
        ${type === "PY" ? null : "APPROVED"}, ${type === "PY" ? "module" : null},
        ${type === "PY" ? null : 1})`.execute(db);
  for (const v of [1, 2, 3])
    await sql`insert into script_versions (element_id, version, kind, content, sha256, size,
        created_at) values (1, ${v}, 'module', ${new TextEncoder().encode(`#${v}`)}, 'x', 2, ${v})`.execute(
      db,
    );
  const pins = JSON.stringify([
    { nodeId: "n", elementId: "1", elementName: "s", path: "/", version: 1, sha256: "x" },
  ]);
  await sql`insert into flow_revisions (element_id, version, name, flow, configure, created_at,
      released_at, script_pins) values (2, 1, 'r', '{}', '{}', 0, 0, ${pins})`.execute(db);
}

describe("migration 020 fills revision_pins from the pins already stored", () => {
  const dirs: string[] = [];
  after(() => {
    for (const d of dirs) fs.rmSync(d, { recursive: true, force: true });
  });
  const tmp = () => {
    const d = fs.mkdtempSync(path.join(os.tmpdir(), "sluice-m020-"));
    dirs.push(d);
    return d;
  };

  for (const dialect of ["sqlite", "postgres"] as const) {
    it(dialect, async () => {
      const dataDir = tmp();
      let url: string | undefined;
      if (dialect === "sqlite") {
        const sqlite = openSqlite(path.join(dataDir, "sluice.db"));
        const db = new Kysely<unknown>({ dialect: new SqliteDialect({ database: sqlite.db }) });
        await migrate(db, "sqlite", "019-partial-parent-index");
        await seed(db);
        await db.destroy();
        await sqlite.close();
      } else {
        url = await (await startPostgres()).createDatabase();
        const db = new Kysely<unknown>({
          dialect: new PostgresDialect({ pool: new pg.Pool({ connectionString: url, max: 2 }) }),
        });
        await migrate(db, "postgres", "019-partial-parent-index");
        await seed(db);
        await db.destroy();
      }
      const store = await openStore({ databaseUrl: url, dataDir });
      try {
        const rows = await sql<{
          script_id: number;
          script_version: number;
        }>`select script_id, script_version from revision_pins`.execute(store.db);
        assert.deepEqual(
          rows.rows.map((r) => [Number(r.script_id), r.script_version]),
          [[1, 1]],
        );
        // Past a bound of 3, the upload removes version 2: version 1 is pinned.
        const outcome = await store.putScript(
          {
            scope: SCOPE,
            folderId: "f0",
            name: "s",
            kind: "module",
            content: new TextEncoder().encode("#4"),
            now: 4,
            keepVersions: 3,
          },
          true,
        );
        assert.equal(outcome, "overwritten");
        const kept = await store.scriptVersions("1", 10, 0);
        assert.deepEqual(
          kept.items.map((v) => v.version),
          [4, 3, 1],
        );
      } finally {
        await store.close();
      }
    });
  }
});
