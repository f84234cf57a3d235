import type { Kysely } from "kysely";
import type { Dialect } from "../types.ts";

/**
 * Cron state and error-handler outcomes (docs/flow-graph.md).
 * - `schedule_fires`: the cluster-wide claim of a tick. A node starts a scheduled run only when its
 *   insert of (schedule_id, tick) lands; every other node firing the same tick hits the primary
 *   key and starts nothing. Each tick is claimed on its own row, so claims of consecutive ticks
 *   racing each other cannot make one of them lose. Old rows are pruned (flow-schedules.ts).
 * - `schedule_state`: one row per schedule, its last fired tick (catch-up after a restart).
 * - `error_handler_results`: one row per handler outcome. Kept apart from `runs.detail` because a
 *   sentinel timeout is reported while the run goes on, and the run's end rewrites its detail.
 */
export async function up(db: Kysely<unknown>, dialect: Dialect): Promise<void> {
  const big = dialect === "postgres" ? "bigint" : "integer";
  await db.schema
    .createTable("schedule_state")
    .addColumn("schedule_id", "text", (c) => c.primaryKey())
    .addColumn("last_run_at", big, (c) => c.notNull())
    .execute();
  await db.schema
    .createTable("schedule_fires")
    .addColumn("schedule_id", "text", (c) => c.notNull())
    .addColumn("tick", big, (c) => c.notNull())
    .addPrimaryKeyConstraint("schedule_fires_pk", ["schedule_id", "tick"])
    .execute();
  await db.schema.createIndex("schedule_fires_tick").on("schedule_fires").column("tick").execute();
  await db.schema
    .createTable("error_handler_results")
    .addColumn("id", dialect === "postgres" ? "bigserial" : "integer", (c) =>
      dialect === "postgres" ? c.primaryKey() : c.primaryKey().autoIncrement(),
    )
    .addColumn("run_id", "text", (c) => c.notNull())
    .addColumn("result", "text", (c) => c.notNull())
    .execute();
  await db.schema
    .createIndex("error_handler_results_run")
    .on("error_handler_results")
    .column("run_id")
    .execute();
}
