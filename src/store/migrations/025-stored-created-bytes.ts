import { type Kysely, sql } from "kysely";
import { PARAM_BYTES_SQL } from "../stored-bytes.ts";

/**
 * `element_run_stats.bytes` counts, since this migration, everything a run stores as it is created
 * (docs/security.md, "What an app may store"): its name, initiator and webhook targets besides its
 * parameter, which was all migration 023 counted. Filled again from the runs stored, with the
 * expression a delete subtracts (stored-bytes.ts), so the counters stay exact after an upgrade.
 * An element's row without runs left counts nothing under either expression and stays as it is.
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`insert into element_run_stats (element_id, total_runs, app, bytes)
    select element_id, 0, min(app), sum(${PARAM_BYTES_SQL}) from runs
    group by element_id
    on conflict (element_id) do update set bytes = excluded.bytes`.execute(db);
}
