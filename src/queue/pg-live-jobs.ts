/** What pg-boss's `getDb()` offers: plain SQL on its pool. */
interface Sql {
  executeSql(text: string, values?: unknown[]): Promise<{ rows: unknown[] }>;
}

/**
 * The runs among `runIds` whose job will still reach a worker (docs/cluster.md, "A dead worker's
 * claimed jobs come back"): one waiting (created, retry), or one claimed within
 * `claimedWithinMs` by the database's clock. A claim older than that whose run is still QUEUED
 * belongs to a worker that died (or stalled) between fetching the job and starting the run: a live
 * worker starts a claimed run in milliseconds. Only unfinished jobs are read, so completed history
 * does not slow the sweep.
 */
export async function liveJobs(
  db: Sql,
  tables: readonly string[],
  names: readonly string[],
  runIds: readonly string[],
  claimedWithinMs: number,
): Promise<Set<string>> {
  if (runIds.length === 0) return new Set();
  const sql = tables
    .map(
      (t) => `SELECT data->>'runId' AS id FROM pgboss.${t}
        WHERE name = ANY($1) AND data->>'runId' = ANY($2)
          AND (state < 'active'
            OR (state = 'active' AND started_on > now() - $3 * interval '1 millisecond'))`,
    )
    .join(" UNION ");
  const { rows } = await db.executeSql(sql, [names, runIds, claimedWithinMs]);
  return new Set((rows as { id: string }[]).map((r) => r.id));
}
