import { type Kysely, sql } from "kysely";
import type { Dialect } from "../types.ts";

/**
 * Concurrency limits and fair turns (docs/run-limits.md). A run records the limit of its element
 * when it is accepted (`run_limit`, null: unlimited); a limited run starts only while fewer than
 * that many runs of its element are STARTED, counted through the index below (unfinished runs of
 * one element, in ID = creation order).
 */
export async function up(db: Kysely<unknown>, _dialect: Dialect): Promise<void> {
  await db.schema.alterTable("runs").addColumn("run_limit", "integer").execute();
  await db.schema
    .createIndex("runs_element_unfinished")
    .on("runs")
    .columns(["element_id", "status", "id"])
    .where(sql.ref("status"), "in", ["QUEUED", "STARTED"])
    .execute();
}
