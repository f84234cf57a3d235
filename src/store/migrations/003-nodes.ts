import type { Kysely } from "kysely";
import type { Dialect } from "../types.ts";

/** Process heartbeats: a STARTED run whose node stopped beating is failed by any live node. */
export async function up(db: Kysely<unknown>, dialect: Dialect): Promise<void> {
  await db.schema
    .createTable("nodes")
    .addColumn("id", "text", (c) => c.primaryKey())
    .addColumn("started_at", dialect === "postgres" ? "bigint" : "integer", (c) => c.notNull())
    .addColumn("heartbeat_at", dialect === "postgres" ? "bigint" : "integer", (c) => c.notNull())
    .execute();
}
