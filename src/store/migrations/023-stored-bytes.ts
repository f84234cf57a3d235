import { type Kysely, sql } from "kysely";
import { END_BYTES_SQL, PARAM_BYTES_SQL } from "../stored-bytes.ts";
import type { Dialect } from "../types.ts";

/**
 * The bytes an app's runs store (docs/security.md, "What an app may store"), in the counters the
 * run writes already update (migrations 002 and 006), so that LIMIT_STORED_BYTES_PER_APP costs a
 * run no statement of its own: `element_run_stats.bytes` the parameters of an element's runs
 * (written with the run, whatever its status; `app` added, to sum an app's rows through an index),
 * `run_status_counts.bytes` the texts an end writes (summary, result, error, output, detail with
 * the node logs) of its finished runs. Filled here from the runs already stored, with the same
 * expressions a delete subtracts (stored-bytes.ts), so the counters stay exact after an upgrade.
 */
export async function up(db: Kysely<unknown>, dialect: Dialect): Promise<void> {
  const big = dialect === "postgres" ? "bigint" : "integer";
  await sql`alter table run_status_counts add column bytes ${sql.raw(big)} not null default 0`.execute(
    db,
  );
  await sql`alter table element_run_stats add column bytes ${sql.raw(big)} not null default 0`.execute(
    db,
  );
  await sql`alter table element_run_stats add column app text`.execute(db);
  await sql`insert into run_status_counts (${KEY}, n, bytes)
    select ${KEY}, 0, sum(${END_BYTES_SQL}) from runs
    where status in ('SUCCESS', 'FAILURE', 'CANCELED')
    group by ${KEY}
    on conflict (${KEY}) do update set bytes = excluded.bytes`.execute(db);
  // Script runs had no row (only flows count runs for monitoring): they get one, counting 0 runs.
  await sql`insert into element_run_stats (element_id, total_runs, app, bytes)
    select element_id, 0, min(app), sum(${PARAM_BYTES_SQL}) from runs
    group by element_id
    on conflict (element_id) do update set app = excluded.app, bytes = excluded.bytes`.execute(db);
  await sql`update element_run_stats
    set app = (select e.app from elements e where e.id = element_run_stats.element_id)
    where app is null`.execute(db);
  await sql`create index element_run_stats_app on element_run_stats (app)`.execute(db);
}

const KEY = sql.raw("app, space, element_id, trigger_type, status");
