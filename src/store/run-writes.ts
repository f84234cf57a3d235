import { type Kysely, sql, type Transaction } from "kysely";
import { createBatcher } from "./batch.ts";
import {
  type CounterKey,
  type CounterWrites,
  counterWrites,
  countFinished,
} from "./kysely-monitor.ts";
import { toRun } from "./rows.ts";
import type { Database } from "./schema.ts";
import { bound, shapeCache, shapeOf } from "./shapes.ts";
import type { NewRun, Run, RunEnd } from "./types.ts";
import { RunIdTaken } from "./unique-violation.ts";

export type Write =
  | { kind: "insert"; run: NewRun; end: RunEnd | undefined }
  | { kind: "start"; id: string; startTime: number; nodeId: string | null }
  | { kind: "end"; id: string; end: RunEnd };

/** Per write: inserts true, starts the started run (or undefined), ends whether they ended one. */
export type WriteResult = boolean | Run | undefined;

/** At most this many writes per transaction (a multi-row insert stays far below SQLite's 32,766 bound values). */
const MAX_BATCH = 200;

/**
 * Group commit of run writes (docs/architecture.md, "Group commit"): the inserts and ends of runs
 * issued in one turn of the event loop, and those issued while a commit is under way, commit in
 * one transaction. Each caller's promise still settles only after its own write committed, so the
 * write-behind rules (a run is in the store before or as it is answered) are unchanged; what is
 * saved is a transaction (and, on SQLite, a WAL commit of the same counter and index pages) per
 * run. A failed batch is written again one write per transaction, so that one bad write fails
 * alone.
 */
export function createRunWrites(
  db: Kysely<Database>,
  /** How a batch without inserts is written instead of in one transaction (run-writes-pg.ts). */
  withoutInserts?: (db: Kysely<Database>, writes: readonly Write[]) => Promise<WriteResult[]>,
  /** The store's compiled statements, shared with its other writers of run rows. */
  hot: HotWrites = hotWrites(db),
): {
  insertRun(run: NewRun, end?: RunEnd): Promise<void>;
  startRun(id: string, startTime: number, nodeId: string | null): Promise<Run | undefined>;
  endRun(id: string, end: RunEnd): Promise<boolean>;
} {
  const add = createBatcher<Write, WriteResult>({
    max: MAX_BATCH,
    run: (writes) =>
      withoutInserts && !writes.some((w) => w.kind === "insert")
        ? withoutInserts(db, writes)
        : db.transaction().execute((tx) => applyWrites(tx, writes, hot)),
    // A run's second start in the batch finds it started by the first, as in the batch itself.
    alone: (write, answered) =>
      write.kind === "start" && answered.some((a) => startedBy(a, write.id))
        ? Promise.resolve(undefined)
        : db.transaction().execute((tx) => retryAlone(tx, write)),
  });

  return {
    insertRun: async (run, end) => {
      await add({ kind: "insert", run, end });
    },
    startRun: async (id, startTime, nodeId) => {
      const started = await add({ kind: "start", id, startTime, nodeId });
      return typeof started === "object" ? started : undefined;
    },
    endRun: async (id, end) => (await add({ kind: "end", id, end })) === true,
  };
}

/**
 * Inserts first (a start or end in the same batch may be for one of them), then starts, then
 * ends in run ID order, then the counters once per key in one order (docs/monitoring.md,
 * "Counters"): every writer takes rows in the same order, so two transactions never wait on
 * each other crosswise.
 */
export async function applyWrites(
  tx: Transaction<Database>,
  writes: readonly Write[],
  hot: HotWrites = hotWrites(tx),
): Promise<WriteResult[]> {
  const results: WriteResult[] = writes.map((w) => (w.kind === "insert" ? true : undefined));
  const inserts = writes.flatMap((w) => (w.kind === "insert" ? [runRow(w.run, w.end)] : []));
  if (inserts.length > 0) await hot.insertRuns(tx, inserts);
  await startAll(tx, writes, results);
  const finished: CounterKey[] = inserts.filter((r) => r.end_time !== null);
  finished.push(...(await applyEnds(writes, results, (part) => endAll(tx, part))));
  await applyCounters(tx, writes, finished, hot.counters);
  return results;
}

type RunRow = ReturnType<typeof runRow>;

/**
 * The statements every run write makes, compiled once per shape (shapes.ts): the multi-row insert
 * of run rows per row count, and the counter upserts.
 */
export interface HotWrites {
  insertRuns(tx: Kysely<Database>, rows: readonly RunRow[]): Promise<void>;
  counters: CounterWrites;
}

export function hotWrites(db: Kysely<Database>): HotWrites {
  // Every run row has every column (runRow), so the first row's names are every row's.
  let columns: (keyof RunRow)[] | undefined;
  const insert = shapeCache(MAX_BATCH, (n: number) =>
    shapeOf((slot) =>
      db
        .insertInto("runs")
        .values(
          Array.from({ length: n }, (_, r) =>
            Object.fromEntries(
              (columns ?? []).map((c, k) => [c, slot(r * (columns ?? []).length + k)]),
            ),
          ) as never,
        ),
    ),
  );
  return {
    async insertRuns(tx, rows) {
      if (rows.length === 0) return;
      columns ??= Object.keys(rows[0] ?? {}) as (keyof RunRow)[];
      const cols = columns;
      await tx.executeQuery(
        bound(
          insert(rows.length),
          rows.flatMap((row) => cols.map((c) => row[c])),
        ),
      );
    },
    counters: counterWrites(db),
  };
}

/** Whether `a`, an answered write of the same batch, is a start that started run `id`. */
const startedBy = (a: { item: Write; result: WriteResult }, id: string) =>
  a.item.kind === "start" && a.item.id === id && typeof a.result === "object";

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
  for (const part of byBytes(rows)) for (const [id, k] of await write(part)) ended.set(id, k);
  for (const e of first) results[e.i] = ended.has(e.id);
  for (const e of ends) results[e.i] ??= false;
  return [...ended.values()];
}

/** The monitoring counters of the batch's new flow runs and of the runs it ended. */
async function applyCounters(
  tx: Transaction<Database>,
  writes: readonly Write[],
  finished: readonly CounterKey[],
  counters: CounterWrites,
): Promise<void> {
  const inserted = writes.flatMap((w) => (w.kind === "insert" ? [w.run] : []));
  await countNewFlowRuns(tx, inserted, counters);
  if (finished.length > 0) await counters.countFinished(tx, finished, 1);
}

/**
 * Adds new flow runs to their elements' `totalRuns`, elements sorted so that two transactions
 * never wait on each other's counter rows crosswise.
 */
export async function countNewFlowRuns(
  tx: Kysely<Database>,
  runs: readonly NewRun[],
  counters: CounterWrites,
): Promise<void> {
  const flows = new Map<string, number>();
  for (const r of runs)
    if (r.elementType === "DPL") flows.set(r.elementId, (flows.get(r.elementId) ?? 0) + 1);
  for (const id of [...flows.keys()].sort()) await counters.countRun(tx, id, flows.get(id) ?? 0);
}

/**
 * QUEUED → STARTED for every start of the batch: one `UPDATE … RETURNING` per start time and node
 * (under load most share both), so a worker claims a fetched batch of runs in one statement
 * instead of a read and an update each.
 */
export async function startAll(
  tx: Kysely<Database>,
  writes: readonly Write[],
  results: WriteResult[],
  retry = false,
): Promise<void> {
  const groups = new Map<string, { startTime: number; nodeId: string | null; at: number[] }>();
  writes.forEach((w, i) => {
    if (w.kind !== "start") return;
    const key = `${w.startTime}\n${w.nodeId ?? ""}`;
    const g = groups.get(key) ?? { startTime: w.startTime, nodeId: w.nodeId, at: [] };
    g.at.push(i);
    groups.set(key, g);
  });
  for (const g of groups.values()) {
    const ids = g.at.map((i) => (writes[i] as { id: string }).id);
    const rows = await tx
      .updateTable("runs")
      .set({ status: "STARTED", start_time: g.startTime, node_id: g.nodeId })
      .where("id", "in", ids)
      // A limited run starts only through its claim (run-limits.ts), which counts its element.
      .where("run_limit", "is", null)
      .where((eb) =>
        // A batch whose commit happened but whose answer was lost (a connection reset) is tried
        // again write by write: a run this very start already moved (this node, this start time)
        // is answered as started, or nobody would ever execute it.
        retry
          ? eb.or([
              eb("status", "=", "QUEUED"),
              eb.and([
                eb("status", "=", "STARTED"),
                eb("start_time", "=", g.startTime),
                g.nodeId === null ? eb("node_id", "is", null) : eb("node_id", "=", g.nodeId),
              ]),
            ])
          : eb("status", "=", "QUEUED"),
      )
      .returningAll()
      .execute();
    const byId = new Map(rows.map((r) => [r.id, toRun(r)]));
    // A run's second start in the batch (a second job of it) finds it started, as it would alone:
    // answered as started too, the run would be executed twice.
    for (const i of g.at) {
      const id = (writes[i] as { id: string }).id;
      results[i] = byId.get(id);
      byId.delete(id);
    }
  }
}

/**
 * One write of a failed batch, tried again alone. A batch fails also when its COMMIT was applied
 * and only the answer was lost (a connection reset): then its writes are already in the store, and
 * each is answered as it was made, with nothing counted twice. A start finds its run STARTED by
 * this node at this start time, an end finds the run ended as it says, an insert finds its run.
 */
export async function retryAlone(tx: Transaction<Database>, w: Write): Promise<WriteResult> {
  if (w.kind === "start") {
    const results: WriteResult[] = [undefined];
    await startAll(tx, [w], results, true);
    return results[0];
  }
  if (w.kind === "end") {
    const [ended] = await endAll(tx, [{ id: w.id, c: endColumns(w.end, 0) }]);
    if (ended) {
      await countFinished(tx, [ended[1]], 1);
      return true;
    }
    const row = await tx
      .selectFrom("runs")
      .select(["status", "end_time"])
      .where("id", "=", w.id)
      .executeTakeFirst();
    return row?.status === w.end.status && Number(row.end_time) === w.end.endTime;
  }
  const row = runRow(w.run, w.end);
  const inserted = await tx
    .insertInto("runs")
    .values(row)
    .onConflict((oc) => oc.column("id").doNothing())
    .returning("id")
    .executeTakeFirst();
  if (!inserted) {
    // Its own row (the batch committed unseen) has its time and node: a run ID derived from its
    // purpose is made alike by two nodes, in one millisecond too (docs/error-handlers.md).
    const stored = await tx
      .selectFrom("runs")
      .select(["create_time", "node_id"])
      .where("id", "=", w.run.id)
      .executeTakeFirst();
    if (Number(stored?.create_time) !== w.run.createTime || stored?.node_id !== w.run.nodeId)
      throw new RunIdTaken(w.run.id);
    return true;
  }
  await applyCounters(tx, [w], row.end_time !== null ? [row] : [], counterWrites(tx));
  return true;
}

/** The texts of one statement's ends at most: a task's result and output may be ~18 MiB. */
const MAX_STATEMENT_BYTES = 32 * 1024 * 1024;

export type EndRow = { id: string; c: ReturnType<typeof endColumns> };

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
async function endAll(
  tx: Transaction<Database>,
  ends: readonly EndRow[],
): Promise<Map<string, CounterKey>> {
  const rows = endValues(ends);
  const { rows: changed } = await sql<CounterKey & { id: string }>`
    update runs set
      status = v.column2,
      end_time = cast(v.column3 as bigint),
      duration = cast(v.column3 as bigint) - coalesce(runs.start_time, runs.create_time),
      summary = v.column4, result = v.column5, error = v.column6,
      stdout = v.column7, stderr = v.column8, detail = v.column9, notify_node = v.column10
    from (values ${sql.join(rows)}) as v
    where runs.id = v.column1 and (runs.status || '') in ('QUEUED', 'STARTED')
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

const UNFINISHED = {
  end_time: null,
  duration: null,
  summary: null,
  result: null,
  error: null,
  stdout: null,
  stderr: null,
  detail: null,
  notify_node: null,
};

function endColumns(end: RunEnd, startTime: number) {
  return {
    status: end.status,
    end_time: end.endTime,
    duration: end.endTime - startTime,
    summary: end.summary,
    result: end.result ?? null,
    error: end.error ?? null,
    stdout: end.stdout ?? null,
    stderr: end.stderr ?? null,
    detail: end.detail ? JSON.stringify(end.detail) : null,
    notify_node: end.notifyBy ?? null,
  };
}

/** The runs table's row for a new run (and its end, when it is written ended). */
export function runRow(run: NewRun, end?: RunEnd) {
  return {
    id: run.id,
    app: run.scope.app,
    space: run.scope.space,
    element_id: Number(run.elementId),
    element_type: run.elementType,
    element_name: run.elementName,
    folder_id: run.folderId,
    version: run.version,
    trigger_type: run.triggerType,
    status: run.status,
    run_name: run.runName,
    run_param: run.runParam,
    initiator: run.initiator ? JSON.stringify(run.initiator) : null,
    parent_run_id: run.parentRunId,
    in_process: run.inProcess ? 1 : 0,
    node_id: run.nodeId,
    create_time: run.createTime,
    start_time: run.startTime ?? null,
    rerun_of: run.rerunOf?.runId ?? null,
    rerun_kind: run.rerunOf?.kind ?? null,
    run_limit: run.runLimit ?? null,
    webhooks: run.webhooks?.length ? JSON.stringify(run.webhooks) : null,
    // Every row has every column, so that rows with and without an end share one multi-row insert.
    ...(end ? endColumns(end, run.startTime ?? run.createTime) : UNFINISHED),
  };
}
