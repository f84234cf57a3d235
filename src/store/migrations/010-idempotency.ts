import type { Kysely } from "kysely";
import type { Dialect } from "../types.ts";

/**
 * Idempotent starts (docs/idempotency.md): one row per `Idempotency-Key` of a scope and endpoint.
 * The primary key is the arbiter between concurrent first calls, on one node or many: only one
 * insert of a key lands, and every other call reads the run ID that row names. `expires_at`
 * (epoch ms) carries an index for the prune of keys past their window.
 */
export async function up(db: Kysely<unknown>, dialect: Dialect): Promise<void> {
  const big = dialect === "postgres" ? "bigint" : "integer";
  await db.schema
    .createTable("idempotency_keys")
    .addColumn("app", "text", (c) => c.notNull())
    .addColumn("space", "text", (c) => c.notNull())
    .addColumn("endpoint", "text", (c) => c.notNull())
    .addColumn("idem_key", "text", (c) => c.notNull())
    .addColumn("fingerprint", "text", (c) => c.notNull())
    .addColumn("run_id", "text", (c) => c.notNull())
    .addColumn("created_at", big, (c) => c.notNull())
    .addColumn("expires_at", big, (c) => c.notNull())
    // 1 once the run it names was recorded: a row without its run is then a deleted run, not a
    // first call that is still creating it (or died doing so).
    .addColumn("committed", "integer", (c) => c.notNull().defaultTo(0))
    .addPrimaryKeyConstraint("idempotency_keys_pk", ["app", "space", "endpoint", "idem_key"])
    .execute();
  await db.schema
    .createIndex("idempotency_keys_expires")
    .on("idempotency_keys")
    .column("expires_at")
    .execute();
}
