import { type Kysely, sql } from "kysely";
import type { Dialect } from "../types.ts";

/**
 * Error-handler notifications owed (docs/error-handlers.md, "Durable"): `runs.notify_node` is the
 * node that owes a FAILURE's notifications, written by the statement that records the end and
 * cleared once the handlers' outcomes are recorded. Null for every other run, so the partial
 * index holds only the runs whose notifications are owed: a start-up or a sweep finds them
 * without reading the runs table.
 */
export async function up(db: Kysely<unknown>, _dialect: Dialect): Promise<void> {
  await db.schema.alterTable("runs").addColumn("notify_node", "text").execute();
  await sql`create index runs_notify_owed on runs (notify_node) where notify_node is not null`.execute(
    db,
  );
}
