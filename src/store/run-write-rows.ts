import type { Kysely } from "kysely";
import { type CounterWrites, counterWrites } from "./kysely-monitor.ts";
import type { Database } from "./schema.ts";
import { bound, shapeCache, shapeOf } from "./shapes.ts";
import type { NewRun, Run, RunEnd } from "./types.ts";

/** A run write of the group commit (run-writes.ts); below, the rows of the runs table it writes. */
export type Write =
  | { kind: "insert"; run: NewRun; end: RunEnd | undefined }
  | { kind: "start"; id: string; startTime: number; nodeId: string | null }
  | { kind: "end"; id: string; end: RunEnd };

/** Per write: inserts true, starts the started run (or undefined), ends whether they ended one. */
export type WriteResult = boolean | Run | undefined;

/** At most this many writes per transaction (a multi-row insert stays far below SQLite's 32,766 bound values). */
export const MAX_BATCH = 200;

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

export type EndRow = { id: string; c: ReturnType<typeof endColumns> };

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

export function endColumns(end: RunEnd, startTime: number) {
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
