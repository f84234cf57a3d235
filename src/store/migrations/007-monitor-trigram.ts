import { type Kysely, sql } from "kysely";
import type { Dialect } from "../types.ts";

/**
 * PostgreSQL: a trigram index (`pg_trgm`, part of PostgreSQL's contrib modules) over the text a
 * run list searches — run id, run name, summary and the initiator's JSON text, lower-cased and
 * joined (`searchText` in store/monitor-sql.ts builds the same expression). Text searches test it
 * first, so the index finds the candidate rows and only those are matched field by field
 * (docs/monitoring.md, "How it stays fast"). Without the extension there is no index and the same
 * queries read the element's rows, as before. SQLite keeps its covering index (migration 005).
 */
export async function up(db: Kysely<unknown>, dialect: Dialect): Promise<void> {
  if (dialect !== "postgres") return;
  const available = await sql<{ ok: number }>`select 1 as ok from pg_available_extensions
    where name = 'pg_trgm'`.execute(db);
  if (available.rows.length === 0) return;
  await sql`create extension if not exists pg_trgm`.execute(db);
  await sql`create index runs_search_trgm on runs using gin (${SEARCH_TEXT} gin_trgm_ops)`.execute(
    db,
  );
}

/** Must stay identical to searchText() in store/monitor-sql.ts, or the index is not used. */
const SEARCH_TEXT = sql.raw(
  "(lower(id || ' ' || coalesce(run_name, '') || ' ' || coalesce(summary, '') || ' ' || coalesce(initiator, '')))",
);
