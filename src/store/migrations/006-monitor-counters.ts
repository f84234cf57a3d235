import { type Kysely, sql } from "kysely";
import type { Dialect } from "../types.ts";

/**
 * Monitoring (docs/monitoring.md, "How it stays fast"): exact counts of finished runs per (scope,
 * element, trigger, status). The Store updates them in the same transaction as the run's own
 * write: insertRun of a finished run, endRun, deleteRuns (countFinished in kysely-monitor.ts).
 * Unfinished runs are few and counted from the index when read, so a run costs one counter update.
 * Database triggers would need no Store code, but on SQLite a trigger on `runs` made every insert
 * and update of a run 2-4 times slower, triggered or not.
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
  await sql`insert into run_status_counts (${KEY}, n)
    select ${KEY}, count(*) from runs where status in ('SUCCESS', 'FAILURE', 'CANCELED')
    group by ${KEY}`.execute(db);
}

const KEY = sql.raw("app, space, element_id, trigger_type, status");
