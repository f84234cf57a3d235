import { type Kysely, sql } from "kysely";
import type { Dialect } from "../types.ts";

/**
 * Monitoring (docs/monitoring.md): a per-element run counter, so `totalRuns` never counts rows, and one
 * index per sort order of POST /monitor/runs. Every index leads with (app, space, element_id) — a
 * listing is always of one element in one scope — and ends with id, the tie-break, so that a
 * page is read in index order (no sort) in either direction and stays covered for the id-only
 * page query.
 */
export async function up(db: Kysely<unknown>, dialect: Dialect): Promise<void> {
  const big = dialect === "postgres" ? "bigint" : "integer";
  await db.schema
    .createTable("element_run_stats")
    .addColumn("element_id", big, (c) => c.primaryKey())
    .addColumn("total_runs", big, (c) => c.notNull().defaultTo(0))
    .execute();
  await sql`insert into element_run_stats (element_id, total_runs) select element_id, count(*) from runs group by element_id`.execute(
    db,
  );

  // PostgreSQL sorts NULL last by default, SQLite first; the queries ask for NULL first in both,
  // so the PostgreSQL indexes on nullable columns are built that way to be scanned, not sorted.
  const nullsFirst = dialect === "postgres" ? sql.raw(" nulls first") : sql.raw("");
  const indexes: [string, ReturnType<typeof sql>][] = [
    // Default order. The trailing status, trigger and version make the counts and pages under
    // trigger/version filters index-only: no table row is read for them.
    ["runs_mon_created", sql`create_time, id, status, trigger_type, version`],
    ["runs_mon_started", sql`start_time${nullsFirst}, id`],
    ["runs_mon_ended", sql`end_time${nullsFirst}, id`],
    ["runs_mon_duration", sql`duration${nullsFirst}, id`],
    // Status filter with the default order, the five counts (covered), and the runStatus sort.
    ["runs_mon_status", sql`status, create_time, id, trigger_type, version`],
    ["runs_mon_id", sql`id`],
  ];
  for (const [name, cols] of indexes) {
    await sql`create index ${sql.id(name)} on runs (app, space, element_id, ${cols})`.execute(db);
  }
  // Superseded by runs_mon_created (same leading columns plus the tie-break).
  await sql`drop index if exists runs_scope_element_created`.execute(db);
}
