import { CompiledQuery, type Kysely, type Selectable, sql, type Transaction } from "kysely";
import { createBatcher } from "./batch.ts";
import { deleteArtifactsOf } from "./kysely-artifacts.ts";
import { countFinished } from "./kysely-monitor.ts";
import { databaseNow, type Liveness, liveSince } from "./node-liveness.ts";
import { toRun } from "./rows.ts";
import { type HotWrites, hotWrites, runRow } from "./run-write-rows.ts";
import { countNewRuns, createRunWrites } from "./run-writes.ts";
import { applyStartsAndEnds } from "./run-writes-pg.ts";
import type { Database, RunTable } from "./schema.ts";
import { bound, shapeCache, shapeOf } from "./shapes.ts";
import {
  END_BYTES_SQL,
  endBytes,
  PARAM_BYTES_SQL,
  storedBytes,
  uncountParams,
} from "./stored-bytes.ts";
import type {
  Dialect,
  ElementType,
  NewRun,
  Run,
  RunStatus,
  ScopeFilter,
  SqlExecutor,
  Store,
} from "./types.ts";
import { FINISHED } from "./types.ts";

type RunMethods = Pick<
  Store,
  | "insertRun"
  | "insertRunsWith"
  | "startRun"
  | "endRun"
  | "keepOutput"
  | "getRun"
  | "markFilesRemoved"
  | "deleteRuns"
  | "unfinishedRuns"
  | "childRuns"
  | "heartbeat"
  | "orphanedRuns"
  | "forgetNodes"
  | "queuedBefore"
  | "storedBytes"
>;

/** Run records and node heartbeats over Kysely for both dialects. */
export function runMethods(db: Kysely<Database>, dialect: Dialect): RunMethods {
  const hot = hotWrites(db);
  const writes = createRunWrites(db, dialect === "postgres" ? applyStartsAndEnds : undefined, hot);
  const readRun = runReader(db);
  return {
    insertRun: writes.insertRun,
    insertRunsWith: (runs, also) => insertRunsWith(db, hot, runs, also),
    startRun: writes.startRun,
    endRun: writes.endRun,
    keepOutput: (id, out) => keepOutput(db, id, out),
    getRun: (scope, id) => getRun(readRun, scope, id),
    markFilesRemoved: async (id, note) => {
      await db
        .updateTable("runs")
        .set({ files_removed: JSON.stringify(note) })
        .where("id", "=", id)
        .execute();
    },
    deleteRuns: (scope, ids) => deleteRuns(db, scope, ids),
    unfinishedRuns: (statuses, nodeId) => unfinishedRuns(db, statuses, nodeId),
    childRuns: (parentRunId) => childRuns(db, parentRunId),
    heartbeat: (nodeId, now) => heartbeat(db, dialect, nodeId, now),
    orphanedRuns: (live) => orphanedRuns(db, dialect, live),
    async forgetNodes(kept) {
      const r = await db
        .deleteFrom("nodes")
        .where("heartbeat_at", "<", liveSince(dialect, kept))
        .executeTakeFirst();
      return Number(r.numDeletedRows);
    },
    queuedBefore: (cutoff, limit) => queuedBefore(db, cutoff, limit),
    storedBytes: (app) => storedBytes(db, app),
  };
}

/**
 * The output of a run terminated while it executed, added to its CANCELED record once its process
 * is gone (RunStore.keepOutput), with its bytes on the counter row its end counted, which a delete
 * subtracts them from (stored-bytes.ts). Run row first, then the counter, as every end writes.
 * One conditional update that answers the row it changed: a read first and an update by ID after
 * would, in PostgreSQL, count output on a run a concurrent delete had just removed (the update
 * then found no row, the counter was added to all the same), or count it twice for two keeps.
 */
function keepOutput(
  db: Kysely<Database>,
  id: string,
  out: { stdout: string; stderr: string },
): Promise<boolean> {
  return db.transaction().execute(async (tx) => {
    const row = await tx
      .updateTable("runs")
      .set({ stdout: out.stdout, stderr: out.stderr })
      .where("id", "=", id)
      .where("status", "=", "CANCELED")
      .where("stdout", "is", null)
      .where("stderr", "is", null)
      .returning(["app", "space", "element_id", "trigger_type"])
      .executeTakeFirst();
    if (!row) return false;
    const texts = { summary: null, result: null, error: null, detail: null };
    const bytes = endBytes({ ...texts, ...out });
    await sql`update run_status_counts set bytes = bytes + ${bytes}
      where app = ${row.app} and space = ${row.space} and element_id = ${row.element_id}
        and trigger_type = ${row.trigger_type} and status = 'CANCELED'`.execute(tx);
    return true;
  });
}

/**
 * Reads of single runs (result lookups, waiters woken by one NOTIFY batch, workers) made in
 * one turn share one statement (docs/architecture.md, "Group commit").
 */
function runReader(db: Kysely<Database>): (id: string) => Promise<Run | undefined> {
  const MAX = 500;
  // One compiled statement per count of ids (shapes.ts): the statement is the same every time.
  const select = shapeCache(MAX, (n: number) =>
    shapeOf((slot) =>
      db
        .selectFrom("runs")
        .selectAll()
        .where(
          "id",
          "in",
          Array.from({ length: n }, (_, i) => slot(i)),
        ),
    ),
  );
  return createBatcher<string, Run | undefined>({
    max: MAX,
    async run(ids) {
      const distinct = [...new Set(ids)];
      const { rows } = await db.executeQuery<Selectable<RunTable>>(
        bound(select(distinct.length), distinct),
      );
      const byId = new Map(rows.map((r) => [r.id, toRun(r)]));
      // Each caller gets its own object: two waiters of one run must not share a mutable one.
      return ids.map((id) => {
        const run = byId.get(id);
        return run && { ...run };
      });
    },
  });
}

async function insertRunsWith(
  db: Kysely<Database>,
  hot: HotWrites,
  runs: readonly NewRun[],
  also: (tx: SqlExecutor) => Promise<void>,
): Promise<void> {
  if (runs.length === 0) return;
  await db.transaction().execute(async (tx) => {
    await hot.insertRuns(
      tx,
      runs.map((r) => runRow(r)),
    );
    await countNewRuns(tx, runs, hot.counters);
    await also({
      executeSql: async (text, values) => {
        const r = await tx.executeQuery(CompiledQuery.raw(text, values ?? []));
        return { rows: [...r.rows] };
      },
    });
  });
}

async function getRun(
  readRun: (id: string) => Promise<Run | undefined>,
  scope: ScopeFilter,
  id: string,
): Promise<Run | undefined> {
  const run = await readRun(id);
  // Another scope's run is a run that does not exist (docs/auth.md).
  if (!run || (scope && (run.scope.app !== scope.app || run.scope.space !== scope.space)))
    return undefined;
  return run;
}

async function deleteRuns(
  db: Kysely<Database>,
  scope: ScopeFilter,
  ids: readonly string[],
): Promise<Set<string>> {
  if (ids.length === 0) return new Set<string>();
  const rows = await db.transaction().execute((tx) => deleteRunsIn(tx, scope, ids));
  return new Set(rows);
}

/**
 * Deletes the finished runs among `ids` in the caller's transaction, with what belongs to them:
 * their status counters (docs/monitoring.md), their finished webhook deliveries (a pending one is
 * still made, docs/webhooks.md) and their error-handler results. `totalRuns` is cumulative and
 * stays. Unfinished runs are left. Answers the ids deleted, which in PostgreSQL are only the rows
 * this transaction removed: a concurrent delete of the same run counts it once.
 */
export async function deleteRunsIn(
  tx: Transaction<Database>,
  scope: ScopeFilter,
  ids: readonly string[],
): Promise<string[]> {
  if (ids.length === 0) return [];
  const deleted = await tx
    .deleteFrom("runs")
    .where("id", "in", ids)
    .where("status", "in", [...FINISHED])
    .$if(scope !== null, (q) =>
      q.where("app", "=", scope?.app ?? "").where("space", "=", scope?.space ?? ""),
    )
    .returning(["id", "app", "space", "element_id", "trigger_type", "status"])
    // What they stored (docs/security.md, "What an app may store"), read without their texts.
    .returning([
      sql<number>`${PARAM_BYTES_SQL}`.as("param_bytes"),
      sql<number>`${END_BYTES_SQL}`.as("bytes"),
    ])
    .execute();
  await uncountParams(tx, deleted);
  await countFinished(tx, deleted, -1);
  if (deleted.length === 0) return [];
  const gone = deleted.map((r) => r.id);
  await tx
    .deleteFrom("webhook_deliveries")
    .where("run_id", "in", gone)
    .where("status", "<>", "PENDING")
    .execute();
  await tx.deleteFrom("error_handler_results").where("run_id", "in", gone).execute();
  // Their kept files go with them (docs/artifacts.md).
  await deleteArtifactsOf(tx, gone);
  return gone;
}

async function unfinishedRuns(
  db: Kysely<Database>,
  statuses: readonly RunStatus[],
  nodeId?: string | null,
): Promise<Run[]> {
  let q = db.selectFrom("runs").selectAll().where("status", "in", statuses);
  if (nodeId !== undefined)
    q = nodeId === null ? q.where("node_id", "is", null) : q.where("node_id", "=", nodeId);
  const rows = await q.orderBy("create_time").execute();
  return rows.map(toRun);
}

async function childRuns(db: Kysely<Database>, parentRunId: string): Promise<Run[]> {
  const rows = await db
    .selectFrom("runs")
    .selectAll()
    .where("parent_run_id", "=", parentRunId)
    .execute();
  return rows.map(toRun);
}

async function heartbeat(
  db: Kysely<Database>,
  dialect: Dialect,
  nodeId: string,
  now: number,
): Promise<void> {
  // Beats are written and judged by the database's clock (node-liveness.ts).
  const at = databaseNow(dialect, now);
  await db
    .insertInto("nodes")
    .values({ id: nodeId, started_at: now, heartbeat_at: at })
    .onConflict((oc) => oc.column("id").doUpdateSet({ heartbeat_at: at }))
    .execute();
}

async function orphanedRuns(
  db: Kysely<Database>,
  dialect: Dialect,
  live: Liveness,
): Promise<Run[]> {
  const cutoff = liveSince(dialect, live);
  const rows = await db
    .selectFrom("runs")
    .selectAll()
    .where("status", "=", "STARTED")
    .where((eb) =>
      eb.or([
        eb("node_id", "is", null),
        eb(
          "node_id",
          "not in",
          eb.selectFrom("nodes").select("id").where("heartbeat_at", ">=", cutoff),
        ),
      ]),
    )
    .execute();
  return rows.map(toRun);
}

async function queuedBefore(
  db: Kysely<Database>,
  cutoff: number,
  limit: number,
): Promise<Pick<Run, "id" | "elementType">[]> {
  const rows = await db
    .selectFrom("runs")
    .select(["id", "element_type"])
    .where("status", "=", "QUEUED")
    .where("create_time", "<", cutoff)
    // A limited run waiting for a slot has no job on purpose; run-limits.ts wakes those.
    .where("run_limit", "is", null)
    .orderBy("create_time")
    .limit(limit)
    .execute();
  return rows.map((r) => ({ id: r.id, elementType: r.element_type as ElementType }));
}
