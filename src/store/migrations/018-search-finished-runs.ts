import { type Kysely, sql } from "kysely";
import type { Dialect } from "../types.ts";

/**
 * PostgreSQL: the trigram index of migration 007 keeps only finished runs (`end_time is not
 * null`). A run's row is written three times (created, started, ended), and each write of an
 * indexed row added its trigrams to the index again: a GIN insert of 30-odd entries per write, the
 * largest single cost of a run in PostgreSQL (bench/README.md). Now only the end adds them. Text
 * searches find unfinished runs (few at any time) through the end-time index instead
 * (docs/monitoring.md, "How it stays fast"). Rebuilding reads every run once.
 */
export async function up(db: Kysely<unknown>, dialect: Dialect): Promise<void> {
  if (dialect !== "postgres") return;
  const present = await sql<{ ok: number }>`select 1 as ok from pg_indexes
    where indexname = 'runs_search_trgm'`.execute(db);
  if (present.rows.length === 0) return; // no pg_trgm on this server: nothing to rebuild
  await sql`drop index runs_search_trgm`.execute(db);
  await sql`create index runs_search_trgm on runs using gin (${SEARCH_TEXT} gin_trgm_ops)
    where end_time is not null`.execute(db);
}

/** Must stay identical to SEARCH_TEXT in store/monitor-sql.ts, or the index is not used. */
const SEARCH_TEXT = sql.raw(
  "(lower(id || ' ' || coalesce(run_name, '') || ' ' || coalesce(summary, '') || ' ' || coalesce(initiator, '')))",
);
