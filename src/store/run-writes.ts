import { type Kysely, sql, type Transaction } from "kysely";
import { countFinished, countRun } from "./kysely-monitor.ts";
import type { Database } from "./schema.ts";
import type { NewRun, RunEnd } from "./types.ts";

type Write =
  | { kind: "insert"; run: NewRun; end: RunEnd | undefined }
  | { kind: "end"; id: string; end: RunEnd };

interface Pending {
  write: Write;
  resolve(ended: boolean): void;
  reject(err: unknown): void;
}

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
export function createRunWrites(db: Kysely<Database>): {
  insertRun(run: NewRun, end?: RunEnd): Promise<void>;
  endRun(id: string, end: RunEnd): Promise<boolean>;
} {
  let pending: Pending[] = [];
  let scheduled = false;
  let busy = false;

  async function flush(): Promise<void> {
    scheduled = false;
    busy = true;
    try {
      while (pending.length > 0) {
        const batch = pending.slice(0, MAX_BATCH);
        pending = pending.slice(batch.length);
        await commitBatch(db, batch);
      }
    } finally {
      busy = false;
    }
  }

  function add(write: Write): Promise<boolean> {
    return new Promise<boolean>((resolve, reject) => {
      pending.push({ write, resolve, reject });
      if (scheduled || busy) return;
      scheduled = true;
      // After the I/O callbacks of this turn: the writes their requests made join this batch.
      setImmediate(() => void flush());
    });
  }

  return {
    insertRun: async (run, end) => {
      await add({ kind: "insert", run, end });
    },
    endRun: (id, end) => add({ kind: "end", id, end }),
  };
}

async function commitBatch(db: Kysely<Database>, batch: Pending[]): Promise<void> {
  try {
    const results = await db.transaction().execute((tx) =>
      applyWrites(
        tx,
        batch.map((p) => p.write),
      ),
    );
    batch.forEach((p, i) => {
      p.resolve(results[i] ?? false);
    });
  } catch (err) {
    if (batch.length === 1) {
      batch[0]?.reject(err);
      return;
    }
    for (const p of batch) {
      try {
        const [ended] = await db.transaction().execute((tx) => applyWrites(tx, [p.write]));
        p.resolve(ended ?? false);
      } catch (one) {
        p.reject(one);
      }
    }
  }
}

/**
 * Inserts first (an end in the same batch may be for one of them), then ends, then the counters
 * once per key in one order (docs/monitoring.md, "Counters"): every writer takes counter rows
 * element first, then status, each sorted, so two transactions never wait on each other crosswise.
 * Answers, per write, whether it ended an unfinished run (inserts: true).
 */
async function applyWrites(
  tx: Transaction<Database>,
  writes: readonly Write[],
): Promise<boolean[]> {
  const inserts = writes.flatMap((w) => (w.kind === "insert" ? [runRow(w.run, w.end)] : []));
  if (inserts.length > 0) await tx.insertInto("runs").values(inserts).execute();
  const finished: Parameters<typeof countFinished>[1][number][] = inserts.filter(
    (r) => r.end_time !== null,
  );
  const results: boolean[] = [];
  for (const w of writes) {
    if (w.kind === "insert") {
      results.push(true);
      continue;
    }
    const ended = await endOne(tx, w.id, w.end);
    if (ended) finished.push(ended);
    results.push(ended !== undefined);
  }
  const flows = new Map<string, number>();
  for (const w of writes)
    if (w.kind === "insert" && w.run.elementType === "DPL")
      flows.set(w.run.elementId, (flows.get(w.run.elementId) ?? 0) + 1);
  for (const id of [...flows.keys()].sort()) await countRun(tx, id, flows.get(id));
  if (finished.length > 0) await countFinished(tx, finished, 1);
  return results;
}

function endOne(tx: Transaction<Database>, id: string, end: RunEnd) {
  return tx
    .updateTable("runs")
    .set({
      ...endColumns(end, 0),
      duration: sql<number>`${end.endTime} - coalesce(start_time, create_time)`,
    })
    .where("id", "=", id)
    .where("status", "in", ["QUEUED", "STARTED"])
    .returning(["app", "space", "element_id", "trigger_type", "status"])
    .executeTakeFirst();
}

const UNFINISHED = {
  end_time: null,
  duration: null,
  summary: null,
  result: null,
  error: null,
  stdout: null,
  stderr: null,
  detail: null,
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
    // Every row has every column, so that rows with and without an end share one multi-row insert.
    ...(end ? endColumns(end, run.startTime ?? run.createTime) : UNFINISHED),
  };
}
