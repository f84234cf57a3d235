import assert from "node:assert/strict";
import { createHash } from "node:crypto";
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
 * Upgrading a store written before migration 008 (docs/dataflow-service.md, "Revisions and
 * releases"; docs/script-service.md, "Script versions"): existing scripts become version 1,
 * existing revisions were released by their deploy and pinned nothing.
 */
const SOURCE = "def main(p):\n    return 1\n";

async function seed(db: Kysely<unknown>): Promise<void> {
  await sql`insert into folders (id, app, space, path, created_at)
    values ('f1', 'a', 's', '/', 1000)`.execute(db);
  await sql`insert into elements (app, space, folder_id, type, name, kind, content, created_at, updated_at)
    values ('a', 's', 'f1', 'PY', 'score', 'module', ${Buffer.from(SOURCE)}, 1000, 1000)`.execute(
    db,
  );
  await sql`insert into elements (app, space, folder_id, type, name, status, release_version, created_at, updated_at)
    values ('a', 's', 'f1', 'DPL', 'flow', 'APPROVED', 2, 1000, 3000)`.execute(db);
  const flow = (await sql<{ id: number }>`select id from elements where name = 'flow'`.execute(db))
    .rows[0]?.id;
  for (const [v, at] of [
    [1, 2000],
    [2, 3000],
  ] as const)
    await sql`insert into flow_revisions (element_id, version, name, flow, configure, created_at, user_id)
      values (${flow}, ${v}, ${`r${v}`}, '{"vertexes":[],"edges":[]}', '{}', ${at}, 'alice')`.execute(
      db,
    );
}

async function checkUpgraded(open: () => Promise<Awaited<ReturnType<typeof openStore>>>) {
  const store = await open();
  try {
    const scope = { app: "a", space: "s" };
    const [script] = await store.findElements(scope, { type: "PY", name: "score" });
    const [flow] = await store.findElements(scope, { type: "DPL", name: "flow" });
    assert.ok(script && flow);
    const v = await store.scriptVersion(script.id, null);
    assert.deepEqual(
      [v?.version, v?.sha256, v?.size, v?.createdAt, Buffer.from(v?.content ?? []).toString()],
      [1, createHash("sha256").update(SOURCE).digest("hex"), SOURCE.length, 1000, SOURCE],
    );
    const revs = await store.flowRevisions(flow.id, 10, 0);
    assert.deepEqual(
      revs.items.map((r) => [r.version, r.releasedAt, r.scriptPins]),
      [
        [2, 3000, null],
        [1, 2000, null],
      ],
    );
    const history = await store.releaseHistory(flow.id, 10, 0);
    assert.deepEqual(
      history.items.map((e) => [e.action, e.version, e.userId, e.at]),
      [
        ["DEPLOY", 2, "alice", 3000],
        ["DEPLOY", 1, "alice", 2000],
      ],
    );
    // New uploads continue the numbering.
    await store.putScript(
      {
        scope,
        folderId: "f1",
        name: "score",
        kind: "module",
        content: Buffer.from("x = 2\n"),
        now: 5000,
      },
      true,
    );
    assert.equal((await store.scriptVersion(script.id, null))?.version, 2);
  } finally {
    await store.close();
  }
}

describe("migration 008 upgrades an existing store", () => {
  const dirs: string[] = [];
  after(() => {
    for (const d of dirs) fs.rmSync(d, { recursive: true, force: true });
  });

  it("SQLite", async () => {
    const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), "sluice-m008-"));
    dirs.push(dataDir);
    const sqlite = openSqlite(path.join(dataDir, "sluice.db"));
    const db = new Kysely<unknown>({ dialect: new SqliteDialect({ database: sqlite.db }) });
    await migrate(db, "sqlite", "007-monitor-trigram");
    await seed(db);
    await db.destroy();
    await sqlite.close();
    await checkUpgraded(() => openStore({ dataDir }));
  });

  it("PostgreSQL", async () => {
    const url = await (await startPostgres()).createDatabase();
    const db = new Kysely<unknown>({
      dialect: new PostgresDialect({ pool: new pg.Pool({ connectionString: url, max: 2 }) }),
    });
    await migrate(db, "postgres", "007-monitor-trigram");
    await seed(db);
    await db.destroy();
    await checkUpgraded(() => openStore({ databaseUrl: url, dataDir: os.tmpdir() }));
  });
});
