import { type Kysely, sql } from "kysely";
import type { Dialect } from "../types.ts";

/**
 * Concurrency limits and fair turns (docs/run-limits.md). A run records the limit of its element
 * when it is accepted (`run_limit`, null: unlimited); a limited run starts only while fewer than
 * that many runs of its element are STARTED, counted through the index below (unfinished runs of
 * one element, in ID = creation order). `fair_turns` holds, per queue lane and space, the last
 * turn a submitted job was given: the cluster queue fetches jobs in turn order, so spaces take
 * turns instead of waiting behind each other's backlog.
 */
export async function up(db: Kysely<unknown>, dialect: Dialect): Promise<void> {
  await db.schema.alterTable("runs").addColumn("run_limit", "integer").execute();
  await db.schema
    .createIndex("runs_element_unfinished")
    .on("runs")
    .columns(["element_id", "status", "id"])
    .where(sql.ref("status"), "in", ["QUEUED", "STARTED"])
    .execute();
  await db.schema
    .createTable("fair_turns")
    .addColumn("lane", "text", (c) => c.notNull())
    .addColumn("space_key", "text", (c) => c.notNull())
    .addColumn("turn", dialect === "postgres" ? "bigint" : "integer", (c) => c.notNull())
    .addPrimaryKeyConstraint("fair_turns_pk", ["lane", "space_key"])
    .execute();
  await db.schema.createIndex("fair_turns_lane_turn").on("fair_turns").columns(["lane", "turn"]).execute();
}
