import assert from "node:assert/strict";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { after, before, describe, it } from "node:test";
import { Kysely, PostgresDialect, sql } from "kysely";
import pg from "pg";
import { runMethods } from "../../src/store/kysely-runs.ts";
import { openStore } from "../../src/store/open-store.ts";
import { preparedPool } from "../../src/store/pg-prepared.ts";
import type { Database } from "../../src/store/schema.ts";
import { startPostgres } from "../helpers/pg.ts";
import { newRun } from "../helpers/runs.ts";

describe("prepared statements on PostgreSQL (store/pg-prepared.ts)", () => {
  let pool: pg.Pool;
  let db: Kysely<Record<string, Record<string, unknown>>>;
  let url: string;
  before(async () => {
    url = await (await startPostgres()).createDatabase();
    // One connection, so every statement below meets the same session's prepared statements.
    pool = new pg.Pool({ connectionString: url, max: 1 });
    db = new Kysely({ dialect: new PostgresDialect({ pool: preparedPool(pool) }) });
    await sql`create table t (id int primary key, v text)`.execute(db);
  });
  after(async () => {
    await db.destroy();
    await pool.end();
  });

  const prepared = async () =>
    (
      await sql<{
        statement: string;
      }>`select statement from pg_prepared_statements where name like 'sluice_%'`.execute(db)
    ).rows.map((r) => r.statement);

  it("runs a statement with parameters as a named prepared statement, once per text", async () => {
    for (let i = 0; i < 3; i++)
      await db
        .insertInto("t")
        .values({ id: i, v: `v${i}` })
        .execute();
    const insert = (await prepared()).filter((s) => s.startsWith('insert into "t"'));
    assert.equal(insert.length, 1);
    const rows = await db.selectFrom("t").selectAll().where("id", "=", 2).execute();
    assert.deepEqual(rows, [{ id: 2, v: "v2" }]);
  });

  it("runs a statement without parameters unprepared, so it may hold several commands", async () => {
    await sql.raw("insert into t values (10, 'a'); insert into t values (11, 'b')").execute(db);
    const n = await db
      .selectFrom("t")
      .select((eb) => eb.fn.countAll().as("n"))
      .executeTakeFirst();
    assert.equal(Number(n?.n), 5);
  });

  it("prepares again when another session changed the table's shape under a prepared select", async () => {
    const read = () => db.selectFrom("t").selectAll().where("id", "=", 1).execute();
    assert.deepEqual(await read(), [{ id: 1, v: "v1" }]);
    assert.deepEqual(await read(), [{ id: 1, v: "v1" }]); // the second use prepares it
    const other = new pg.Client({ connectionString: url });
    await other.connect();
    await other.query("alter table t add column w int default 7");
    await other.end();
    // PostgreSQL refuses the old plan ("cached plan must not change result type"): the pool
    // prepares the statement under a new name and the read sees the new column.
    assert.deepEqual(await read(), [{ id: 1, v: "v1", w: 7 }]);
  });

  it("prepares again after a schema change when the server's messages are not in English", async () => {
    // A server with lc_messages = 'de_DE' sends the same error (SQLSTATE 0A000, raised by
    // RevalidateCachedQuery) in German. This pool hands out real connections whose error messages
    // read as such a server's would: nothing else differs.
    const own = new pg.Pool({ connectionString: url, max: 1 });
    const german = {
      connect: async () => {
        const c = await own.connect();
        const query = c.query.bind(c) as (q: unknown) => Promise<unknown>;
        return Object.assign(Object.create(c) as pg.PoolClient, {
          query: (q: unknown) =>
            query(q).catch((err: { code?: string; message: string }) => {
              if (err.code === "0A000")
                err.message = "gecachter Plan darf den Ergebnistyp nicht \u00e4ndern";
              throw err;
            }),
          release: () => c.release(),
        });
      },
    } as unknown as pg.Pool;
    const de = new Kysely<Record<string, Record<string, unknown>>>({
      dialect: new PostgresDialect({ pool: preparedPool(german) }),
    });
    try {
      await sql`create table u (id int primary key, v text)`.execute(db);
      await sql`insert into u values (1, 'a')`.execute(db);
      const read = () => de.selectFrom("u").selectAll().where("id", "=", 1).execute();
      assert.deepEqual(await read(), [{ id: 1, v: "a" }]);
      assert.deepEqual(await read(), [{ id: 1, v: "a" }]); // the second use prepares it
      await sql`alter table u add column w int default 7`.execute(db);
      // Before: the German message was not recognised, so the stale statement failed on every
      // call on this connection for as long as the connection lived.
      assert.deepEqual(await read(), [{ id: 1, v: "a", w: 7 }]);
      assert.deepEqual(await read(), [{ id: 1, v: "a", w: 7 }]);
    } finally {
      await de.destroy();
      await own.end();
    }
  });

  it("prepares a text on its second use, at most a bounded number of texts; the rest still run", async () => {
    const own = new pg.Pool({ connectionString: url, max: 1 });
    const fresh = new Kysely({ dialect: new PostgresDialect({ pool: preparedPool(own) }) });
    try {
      const once = await sql<{ x: number }>`select ${1}::int - 1 as x`.execute(fresh);
      assert.equal(once.rows[0]?.x, 0);
      for (let i = 0; i < 300; i++)
        for (let twice = 0; twice < 2; twice++) {
          const r = await sql<{
            x: number;
          }>`select ${i}::int + ${sql.raw(String(i))} as x`.execute(fresh);
          assert.equal(r.rows[0]?.x, 2 * i);
        }
      const { rows } = await sql<{
        n: string;
      }>`select count(*) as n from pg_prepared_statements`.execute(fresh);
      assert.equal(Number(rows[0]?.n), 256);
      const single = await sql<{
        n: string;
      }>`select count(*) as n from pg_prepared_statements where statement like ${"%- 1 as x"}`.execute(
        fresh,
      );
      assert.equal(Number(single.rows[0]?.n), 0, "a text used once is not prepared");
    } finally {
      await fresh.destroy();
      await own.end();
    }
  });

  it("keeps the memory a connection's prepared statements hold bounded, whatever the batch sizes", async () => {
    // The run writes' texts vary with the batch's size: a 150-row insert has 3,450 parameters,
    // and its prepared statement holds ~1 MB of the server's memory for as long as the connection
    // lives. 256 such texts held ~100 MB on each connection of the pool.
    const runsUrl = await (await startPostgres()).createDatabase();
    const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), "sluice-prep-"));
    await (await openStore({ databaseUrl: runsUrl, dataDir })).close(); // migrated
    const own = new pg.Pool({ connectionString: runsUrl, max: 1 });
    const hot = new Kysely<Database>({ dialect: new PostgresDialect({ pool: preparedPool(own) }) });
    try {
      const runs = runMethods(hot, "postgres");
      let n = 0;
      // Each size twice: a text is prepared on its second use.
      for (let k = 0; k < 40; k++) {
        const size = 150 + (k >> 1);
        const batch = Array.from({ length: size }, () => newRun({ id: `mem${n++}` }));
        // One turn: the batch goes as one statement of each kind.
        await Promise.all(batch.map((r) => runs.insertRun(r)));
        await Promise.all(batch.map((r) => runs.startRun(r.id, 5, "n1")));
        await Promise.all(
          batch.map((r) => runs.endRun(r.id, { status: "SUCCESS", endTime: 9, summary: "s" })),
        );
      }
      const { rows } = await sql<{ bytes: string }>`select sum(total_bytes) as bytes
        from pg_backend_memory_contexts where name like 'CachedPlan%'`.execute(hot);
      const mib = Number(rows[0]?.bytes) / 2 ** 20;
      assert.ok(mib < 16, `prepared statements hold ${mib.toFixed(1)} MiB on one connection`);
      const ended = await sql<{ n: string }>`select count(*) as n from runs
        where status = 'SUCCESS'`.execute(hot);
      assert.equal(Number(ended.rows[0]?.n), n, "the statements not prepared still ran");
    } finally {
      await hot.destroy();
      await own.end();
      fs.rmSync(dataDir, { recursive: true, force: true });
    }
  });
});
