import type { Kysely, Transaction } from "kysely";
import { createBatcher } from "./batch.ts";
import {
  type CounterKey,
  type CounterWrites,
  counterWrites,
  countFinished,
} from "./kysely-monitor.ts";
import { toRun } from "./rows.ts";
import { applyEnds, endAll } from "./run-ends.ts";
import {
  endColumns,
  type HotWrites,
  hotWrites,
  MAX_BATCH,
  runRow,
  type Write,
  type WriteResult,
} from "./run-write-rows.ts";
import type { Database } from "./schema.ts";
import { endBytes, newRunBytes } from "./stored-bytes.ts";
import type { NewRun, Run, RunEnd } from "./types.ts";
import { RunIdTaken } from "./unique-violation.ts";

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
  const finished: CounterKey[] = inserts.flatMap((r) =>
    r.end_time !== null ? [{ ...r, bytes: endBytes(r) }] : [],
  );
  finished.push(...(await applyEnds(writes, results, (part) => endAll(tx, part))));
  await applyCounters(tx, writes, finished, hot.counters);
  return results;
}

/** Whether `a`, an answered write of the same batch, is a start that started run `id`. */
const startedBy = (a: { item: Write; result: WriteResult }, id: string) =>
  a.item.kind === "start" && a.item.id === id && typeof a.result === "object";

/** The monitoring counters of the batch's new flow runs and of the runs it ended. */
async function applyCounters(
  tx: Transaction<Database>,
  writes: readonly Write[],
  finished: readonly CounterKey[],
  counters: CounterWrites,
): Promise<void> {
  const inserted = writes.flatMap((w) => (w.kind === "insert" ? [w.run] : []));
  await countNewRuns(tx, inserted, counters);
  if (finished.length > 0) await counters.countFinished(tx, finished, 1);
}

/**
 * Adds new flow runs to their elements' `totalRuns`, and what every new run stores as it is
 * created (parameter, name, initiator, webhook targets: stored-bytes.ts) to its element's bytes (docs/security.md, "What an app may store"), elements sorted so that two
 * transactions never wait on each other's counter rows crosswise.
 */
export async function countNewRuns(
  tx: Kysely<Database>,
  runs: readonly NewRun[],
  counters: CounterWrites,
): Promise<void> {
  const elements = new Map<string, { app: string; runs: number; bytes: number }>();
  for (const r of runs) {
    const e = elements.get(r.elementId) ?? { app: r.scope.app, runs: 0, bytes: 0 };
    if (r.elementType === "DPL") e.runs += 1;
    e.bytes += newRunBytes(r);
    elements.set(r.elementId, e);
  }
  for (const id of [...elements.keys()].sort()) {
    const e = elements.get(id);
    if (e && (e.runs > 0 || e.bytes > 0)) await counters.countRun(tx, e.app, id, e.runs, e.bytes);
  }
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
    const c = endColumns(w.end, 0);
    const [ended] = await endAll(tx, [{ id: w.id, c }]);
    if (ended) {
      await countFinished(tx, [{ ...ended[1], bytes: endBytes(c) }], 1);
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
  const finished = row.end_time !== null ? [{ ...row, bytes: endBytes(row) }] : [];
  await applyCounters(tx, [w], finished, counterWrites(tx));
  return true;
}
