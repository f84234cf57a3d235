import { type Kysely, sql } from "kysely";
import type { Dialect } from "../types.ts";

/**
 * SQLite: the default-order monitoring index also carries the columns text searches read
 * (run_name, summary, initiator), so a quickSearch over one flow scans that flow's index range in
 * order instead of touching every one of its rows across the table. The index is rewritten on
 * every status change anyway (status is in it), so the wider entry adds bytes, not writes.
 * PostgreSQL keeps the narrow index: it caps an index entry at ~2.7 kB and a summary can be longer.
 */
export async function up(db: Kysely<unknown>, dialect: Dialect): Promise<void> {
  if (dialect !== "sqlite") return;
  await sql`drop index if exists runs_mon_created`.execute(db);
  await sql`create index runs_mon_created on runs (app, space, element_id, create_time, id, status, trigger_type, version, run_name, summary, initiator)`.execute(
    db,
  );
}
