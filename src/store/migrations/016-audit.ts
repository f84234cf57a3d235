import type { Kysely } from "kysely";
import type { Dialect } from "../types.ts";

/**
 * The audit trail (docs/audit.md): one row per change made through the API and per token use in
 * signature mode. Rows are only ever inserted and, past their retention, deleted in batches; the
 * API has no way to change one. Listing reads a scope newest first (`audit_scope_at`); the purge
 * reads the oldest rows of every scope (`audit_at`).
 */
export async function up(db: Kysely<unknown>, dialect: Dialect): Promise<void> {
  const big = dialect === "postgres" ? "bigint" : "integer";
  await db.schema
    .createTable("audit_entries")
    .addColumn("id", "text", (c) => c.primaryKey())
    .addColumn("at", big, (c) => c.notNull())
    .addColumn("app", "text", (c) => c.notNull())
    .addColumn("space", "text", (c) => c.notNull())
    .addColumn("user_name", "text")
    .addColumn("address", "text")
    .addColumn("method", "text", (c) => c.notNull())
    .addColumn("route", "text", (c) => c.notNull())
    .addColumn("action", "text", (c) => c.notNull())
    .addColumn("target", "text", (c) => c.notNull())
    .addColumn("outcome", "text", (c) => c.notNull())
    .addColumn("code", "integer")
    .addColumn("http_status", "integer", (c) => c.notNull())
    .addColumn("duration_ms", "integer", (c) => c.notNull())
    .addColumn("request_id", "text")
    .execute();
  await db.schema
    .createIndex("audit_scope_at")
    .on("audit_entries")
    .columns(["app", "space", "at"])
    .execute();
  await db.schema.createIndex("audit_at").on("audit_entries").column("at").execute();
}
