import { type Kysely, sql } from "kysely";
import type { CounterKey } from "./kysely-monitor.ts";
import { applyEnds, endValues } from "./run-ends.ts";
import type { EndRow, Write, WriteResult } from "./run-write-rows.ts";
import { startAll } from "./run-writes.ts";
import type { Database } from "./schema.ts";
import { END_BYTES_SQL } from "./stored-bytes.ts";

/**
 * PostgreSQL, a batch without inserts (a worker's claims and ends): each statement alone, with no
 * transaction around them. Every start group is one `UPDATE … RETURNING` and the ends with their
 * counters one statement (below), each atomic by itself, and no write of the batch depends on
 * another. That is two or three round trips instead of six or more per batch (docs/cluster.md,
 * "Group commit"). A batch that fails part-way is written again write by write, as any failed
 * batch: a start already applied is found STARTED by this node at its start time, an end found
 * ended as it says, so nothing is applied or counted twice.
 */
export async function applyStartsAndEnds(
  db: Kysely<Database>,
  writes: readonly Write[],
): Promise<WriteResult[]> {
  const results: WriteResult[] = writes.map(() => undefined);
  await startAll(db, writes, results);
  await applyEnds(writes, results, (part) => endCounted(db, part));
  return results;
}

/**
 * The ends of `ends` and their counters (migration 006, with the bytes the ends wrote: 023) in one statement: the `UPDATE … FROM
 * (VALUES …)` of run-ends.ts's endAll feeds the counter upsert through a data-modifying CTE.
 * Counter rows are taken in the order countFinished takes them (kysely-monitor.ts, counterOrder),
 * so that this statement and another writer's transaction never wait on each other's rows
 * crosswise.
 */
async function endCounted(
  db: Kysely<Database>,
  ends: readonly EndRow[],
): Promise<Map<string, CounterKey>> {
  const values = endValues(ends);
  const { rows } = await sql<CounterKey & { id: string }>`
    with v (id, status, end_time, summary, result, error, stdout, stderr, detail, notify_node) as (
      values ${sql.join(values)}
    ), e as (
      update runs set
        status = v.status,
        end_time = cast(v.end_time as bigint),
        duration = cast(v.end_time as bigint) - coalesce(runs.start_time, runs.create_time),
        summary = v.summary, result = v.result, error = v.error,
        stdout = v.stdout, stderr = v.stderr, detail = v.detail, notify_node = v.notify_node
      from v
      where runs.id = v.id and (runs.status || '') in ('QUEUED', 'STARTED')
      returning runs.id, runs.app, runs.space, runs.element_id, runs.trigger_type, runs.status,
        ${END_BYTES_SQL} as bytes
    ), c as (
      insert into run_status_counts (app, space, element_id, trigger_type, status, n, bytes)
      select app, space, element_id, trigger_type, status, count(*), sum(bytes) from e
      where status in ('SUCCESS', 'FAILURE', 'CANCELED')
      group by app, space, element_id, trigger_type, status
      order by app collate "C", space collate "C", element_id::text collate "C",
        trigger_type collate "C", status collate "C"
      on conflict (app, space, element_id, trigger_type, status)
        do update set n = run_status_counts.n + excluded.n,
          bytes = run_status_counts.bytes + excluded.bytes
    )
    select id, app, space, element_id, trigger_type, status from e`.execute(db);
  return new Map(rows.map((r) => [r.id, r]));
}
