import { sql, type Transaction } from "kysely";
import type { CounterKey } from "./kysely-monitor.ts";
import { type EndRow, endColumns, type Write, type WriteResult } from "./run-write-rows.ts";
import type { Database } from "./schema.ts";
import { endBytes } from "./stored-bytes.ts";

/**
 * Writes the batch's ends through `write`, in run ID order and in parts of bounded size, and
 * answers each in `results`; returns the counter keys of the runs they ended. A run ends once, so
 * a second end of it in the same batch finds it ended, as it would alone.
 */
export async function applyEnds(
  writes: readonly Write[],
  results: WriteResult[],
  write: (part: EndRow[]) => Promise<Map<string, CounterKey>>,
): Promise<CounterKey[]> {
  const ends = writes.flatMap((w, i) => (w.kind === "end" ? [{ id: w.id, end: w.end, i }] : []));
  ends.sort((a, b) => (a.id < b.id ? -1 : a.id > b.id ? 1 : a.i - b.i));
  const first = ends.filter((e, k) => k === 0 || ends[k - 1]?.id !== e.id);
  const ended = new Map<string, CounterKey>();
  const rows = first.map((e) => ({ id: e.id, c: endColumns(e.end, 0) }));
  for (const part of byBytes(rows)) {
    const changed = await write(part);
    // Each run's counter key with the bytes its end wrote (docs/security.md, "What an app may store").
    for (const r of part) {
      const k = changed.get(r.id);
      if (k) ended.set(r.id, { ...k, bytes: endBytes(r.c) });
    }
  }
  for (const e of first) results[e.i] = ended.has(e.id);
  for (const e of ends) results[e.i] ??= false;
  return [...ended.values()];
}

/** The texts of one statement's ends at most: a task's result and output may be ~18 MiB. */
const MAX_STATEMENT_BYTES = 32 * 1024 * 1024;

/**
 * Ends split so that no statement carries more than MAX_STATEMENT_BYTES of text: many large ends
 * in one message would be refused by the server and fail the whole batch.
 */
function byBytes(ends: readonly EndRow[]): EndRow[][] {
  const parts: EndRow[][] = [];
  let part: EndRow[] = [];
  let bytes = 0;
  for (const e of ends) {
    const { result, error, stdout, stderr, summary, detail } = e.c;
    const size = [result, error, stdout, stderr, summary, detail].reduce(
      (n, t) => n + (t?.length ?? 0),
      0,
    );
    if (part.length > 0 && bytes + size > MAX_STATEMENT_BYTES) {
      parts.push(part);
      part = [];
      bytes = 0;
    }
    part.push(e);
    bytes += size;
  }
  if (part.length > 0) parts.push(part);
  return parts;
}

/**
 * Every end of the batch (or of its part, above) in one `UPDATE … FROM (VALUES …)`: one statement (in a cluster, one round
 * trip) however many runs end together. Only unfinished runs change, so an end that lost to
 * another (a terminate) changes nothing; answers the counter key of each run it ended. `VALUES`
 * columns are `column1…` in both dialects; the casts give PostgreSQL the types its text
 * parameters lack. The status test is an expression (`|| ''`) so that no index on status can
 * serve it: SQLite would otherwise scan every unfinished run for each batch (the queue may hold
 * thousands) instead of looking each run up by its ID.
 */
export async function endAll(
  tx: Transaction<Database>,
  ends: readonly EndRow[],
  /** Only runs still STARTED by this node (docs/cluster.md, "Runs STARTED here that nothing executes"). */
  startedOn?: string,
): Promise<Map<string, CounterKey>> {
  const rows = endValues(ends);
  const onNode =
    startedOn === undefined
      ? sql``
      : sql` and (runs.status || '') = 'STARTED' and runs.node_id = ${startedOn}`;
  const { rows: changed } = await sql<CounterKey & { id: string }>`
    update runs set
      status = v.column2,
      end_time = cast(v.column3 as bigint),
      duration = cast(v.column3 as bigint) - coalesce(runs.start_time, runs.create_time),
      summary = v.column4, result = v.column5, error = v.column6,
      stdout = v.column7, stderr = v.column8, detail = v.column9, notify_node = v.column10
    from (values ${sql.join(rows)}) as v
    where runs.id = v.column1 and (runs.status || '') in ('QUEUED', 'STARTED')${onNode}
    returning runs.id, runs.app, runs.space, runs.element_id, runs.trigger_type, runs.status`.execute(
    tx,
  );
  return new Map(changed.map((r) => [r.id, r]));
}

/**
 * The `VALUES` rows of ends: id, status, end time, summary, result, error, stdout, stderr, detail,
 * and the node owing the run's error-handler notifications (null for nearly every end): the mark
 * is written by the statement that records the end, no other (docs/error-handlers.md, "Durable").
 */
export const endValues = (ends: readonly EndRow[]) =>
  ends.map(
    ({ id, c }) =>
      sql`(${id}, ${c.status}, ${c.end_time}, ${c.summary}, ${c.result}, ${c.error}, ${c.stdout}, ${c.stderr}, ${c.detail}, ${c.notify_node})`,
  );
