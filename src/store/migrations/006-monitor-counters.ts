import { type Kysely, sql } from "kysely";
import type { Dialect } from "../types.ts";

/**
 * Monitoring (docs/monitoring.md, "How it stays fast"): exact run counts per (scope, element,
 * trigger, status), kept by database triggers on `runs` so that every write path (insertRun,
 * startRun, endRun, deleteRuns, recovery, batched writes) updates them in its own transaction,
 * and a run list answers its five counts without counting rows.
 *
 * SQLite has one writer at a time, so a row trigger is exact. PostgreSQL takes the counter row's
 * lock in `ON CONFLICT DO UPDATE` until commit, so concurrent writers serialise on it and stay
 * exact; its triggers are per statement (transition tables), one grouped upsert per statement
 * however many rows it wrote, in key order so that two statements lock shared rows in one order.
 */
export async function up(db: Kysely<unknown>, dialect: Dialect): Promise<void> {
  const big = dialect === "postgres" ? "bigint" : "integer";
  await db.schema
    .createTable("run_status_counts")
    .addColumn("app", "text", (c) => c.notNull())
    .addColumn("space", "text", (c) => c.notNull())
    .addColumn("element_id", big, (c) => c.notNull())
    .addColumn("trigger_type", "text", (c) => c.notNull())
    .addColumn("status", "text", (c) => c.notNull())
    .addColumn("n", big, (c) => c.notNull())
    .addPrimaryKeyConstraint("run_status_counts_pk", [
      "app",
      "space",
      "element_id",
      "trigger_type",
      "status",
    ])
    .execute();
  await sql`insert into run_status_counts (app, space, element_id, trigger_type, status, n)
    select app, space, element_id, trigger_type, status, count(*) from runs
    group by app, space, element_id, trigger_type, status`.execute(db);
  if (dialect === "postgres") await postgresTriggers(db);
  else await sqliteTriggers(db);
}

const KEY_COLUMNS = "app, space, element_id, trigger_type, status";
const KEY = sql.raw(KEY_COLUMNS);

async function sqliteTriggers(db: Kysely<unknown>): Promise<void> {
  const bump = (row: "new" | "old", delta: 1 | -1) =>
    sql.raw(`insert into run_status_counts (app, space, element_id, trigger_type, status, n)
      values (${row}.app, ${row}.space, ${row}.element_id, ${row}.trigger_type, ${row}.status, ${delta})
      on conflict (app, space, element_id, trigger_type, status) do update set n = n + ${delta};`);
  await sql`create trigger runs_count_insert after insert on runs
    begin ${bump("new", 1)} end`.execute(db);
  await sql`create trigger runs_count_status after update of status on runs
    when old.status <> new.status
    begin ${bump("old", -1)} ${bump("new", 1)} end`.execute(db);
  await sql`create trigger runs_count_delete after delete on runs
    begin ${bump("old", -1)} end`.execute(db);
}

async function postgresTriggers(db: Kysely<unknown>): Promise<void> {
  // `deltas` is a query yielding (KEY, d); the function adds each group's sum to its counter.
  const fn = async (name: string, deltas: ReturnType<typeof sql.raw>) => {
    await sql`create function ${sql.id(name)}() returns trigger language plpgsql as $$
      begin
        insert into run_status_counts (${KEY}, n)
          select ${KEY}, sum(d) from (${deltas}) deltas
          group by ${KEY} order by ${KEY}
          on conflict (${KEY}) do update set n = run_status_counts.n + excluded.n;
        return null;
      end $$`.execute(db);
  };
  await fn("runs_count_insert", sql.raw(`select ${KEY_COLUMNS}, 1 as d from new_rows`));
  await fn(
    "runs_count_status",
    sql.raw(`select o.app, o.space, o.element_id, o.trigger_type, o.status, -1 as d
        from old_rows o join new_rows n on n.id = o.id where n.status <> o.status
      union all
      select n.app, n.space, n.element_id, n.trigger_type, n.status, 1
        from old_rows o join new_rows n on n.id = o.id where n.status <> o.status`),
  );
  await fn("runs_count_delete", sql.raw(`select ${KEY_COLUMNS}, -1 as d from old_rows`));
  await sql`create trigger runs_count_insert after insert on runs
    referencing new table as new_rows for each statement execute function runs_count_insert()`.execute(
    db,
  );
  await sql`create trigger runs_count_status after update on runs
    referencing old table as old_rows new table as new_rows
    for each statement execute function runs_count_status()`.execute(db);
  await sql`create trigger runs_count_delete after delete on runs
    referencing old table as old_rows for each statement execute function runs_count_delete()`.execute(
    db,
  );
}
