import { type Kysely, sql } from "kysely";
import type { Dialect } from "../types.ts";

/**
 * Completion webhooks (docs/webhooks.md).
 * - `runs.webhooks`: JSON of the URLs the run calls when it ends (its flow's configure and the
 *   call's `callbackUrl`), written with the run, so whichever node ends it knows them. A partial
 *   index finds, at start, the ended runs with webhooks whose deliveries were never created.
 * - `webhook_deliveries`: the durable outbox, one row per run end and URL. Its ID is the run's ID
 *   and the target's index, so a second creation of one is a no-op; a node claims due rows with one
 *   UPDATE (`claimed_by`, `claim_until`), so in a cluster one node makes each attempt.
 * - `webhook_secrets`: one signing secret per app and space, made on first use.
 */
export async function up(db: Kysely<unknown>, dialect: Dialect): Promise<void> {
  const big = dialect === "postgres" ? "bigint" : "integer";
  await db.schema.alterTable("runs").addColumn("webhooks", "text").execute();
  await sql`create index runs_webhooks_ended on runs (end_time) where webhooks is not null`.execute(
    db,
  );
  await db.schema
    .createTable("webhook_deliveries")
    .addColumn("id", "text", (c) => c.primaryKey())
    .addColumn("run_id", "text", (c) => c.notNull())
    .addColumn("app", "text", (c) => c.notNull())
    .addColumn("space", "text", (c) => c.notNull())
    .addColumn("url", "text", (c) => c.notNull())
    .addColumn("event", "text", (c) => c.notNull())
    .addColumn("body", "text", (c) => c.notNull())
    .addColumn("status", "text", (c) => c.notNull())
    .addColumn("attempts", "integer", (c) => c.notNull())
    .addColumn("log", "text", (c) => c.notNull())
    .addColumn("next_at", big, (c) => c.notNull())
    .addColumn("claimed_by", "text")
    .addColumn("claim_until", big)
    .addColumn("created_at", big, (c) => c.notNull())
    .execute();
  await db.schema
    .createIndex("webhook_deliveries_due")
    .on("webhook_deliveries")
    .columns(["status", "next_at"])
    .execute();
  await db.schema
    .createIndex("webhook_deliveries_run")
    .on("webhook_deliveries")
    .column("run_id")
    .execute();
  await db.schema
    .createTable("webhook_secrets")
    .addColumn("app", "text", (c) => c.notNull())
    .addColumn("space", "text", (c) => c.notNull())
    .addColumn("secret", "text", (c) => c.notNull())
    .addColumn("created_at", big, (c) => c.notNull())
    .addPrimaryKeyConstraint("webhook_secrets_pk", ["app", "space"])
    .execute();
}
