import { type Kysely, sql, type Transaction } from "kysely";
import { monitorRuns, runsByIds } from "./monitor-runs.ts";
import type { MonitorTables } from "./monitor-tables.ts";
import { ELEMENT_COLUMNS, toElement } from "./rows.ts";
import type { Database } from "./schema.ts";
import { bound, type Shape, shapeOf } from "./shapes.ts";
import type { Dialect, FlowListRow, FlowOverviewRow, Scope, ScopeFilter, Store } from "./types.ts";
import { FINISHED } from "./types.ts";

/**
 * From this many runs of one element on, PostgreSQL text searches go through the trigram index
 * (migration 007). Below it, reading the element's rows is cheaper than the index whenever the
 * text is common across other elements (e.g. `backfill-1`: tens of thousands of rows table-wide).
 */
const TEXT_INDEX_MIN_RUNS = 20_000;

export type MonitorMethods = Pick<Store, "monitorRuns" | "monitorFlows" | "listFlows">;

/** What identifies a run's counter in run_status_counts. */
export interface CounterKey {
  app: string;
  space: string;
  element_id: number;
  trigger_type: string;
  status: string;
  /** The texts the run's end wrote (stored-bytes.ts); absent: none. */
  bytes?: number;
}

/**
 * The one order every writer takes counter rows in (here and in run-writes-pg.ts's statement,
 * which sorts the same fields bytewise): by app, space, element ID as text, trigger, status.
 */
function counterOrder(a: CounterKey, b: CounterKey): number {
  const x = [a.app, a.space, String(a.element_id), a.trigger_type, a.status];
  const y = [b.app, b.space, String(b.element_id), b.trigger_type, b.status];
  for (let i = 0; i < x.length; i++)
    if (x[i] !== y[i]) return (x[i] as string) < (y[i] as string) ? -1 : 1;
  return 0;
}

/** The counters' changes for `keys`, one per counter, in counterOrder. */
function counterDeltas(
  keys: readonly CounterKey[],
  delta: 1 | -1,
): (CounterKey & { n: number; bytes: number })[] {
  const grouped = new Map<string, CounterKey & { n: number; bytes: number }>();
  for (const k of keys) {
    if (!(FINISHED as readonly string[]).includes(k.status)) continue;
    const id = JSON.stringify([k.app, k.space, k.element_id, k.trigger_type, k.status]);
    const g = grouped.get(id) ?? { ...k, n: 0, bytes: 0 };
    g.n += delta;
    g.bytes += delta * Number(k.bytes ?? 0);
    grouped.set(id, g);
  }
  return [...grouped.values()].sort(counterOrder);
}

/**
 * Adds `delta` to the counters of finished runs (migration 006) for each key, in the caller's
 * transaction with the runs' own write. PostgreSQL's upsert holds the counter row until commit,
 * so concurrent writers queue on it and the count stays exact; keys go in one order so that two
 * transactions never wait on each other's rows crosswise. For the writes outside the hot path
 * (deletes, a retried write): the same statement as counterWrites', compiled for this call.
 */
export function countFinished(
  tx: Transaction<Database>,
  keys: readonly CounterKey[],
  delta: 1 | -1,
): Promise<void> {
  return counterWrites(tx).countFinished(tx, keys, delta);
}

/**
 * The counter upserts of the run writes' hot path, compiled once (shapes.ts): `countRun` adds new
 * runs to their element's `totalRuns` (one row per element, so the overview never counts runs)
 * and their parameters' bytes to its `bytes` (docs/security.md, "What an app may store"),
 * `countFinished` as above, with the bytes the ends wrote.
 */
export interface CounterWrites {
  countRun(
    tx: Kysely<Database>,
    app: string,
    elementId: string,
    runs: number,
    bytes: number,
  ): Promise<void>;
  countFinished(tx: Kysely<Database>, keys: readonly CounterKey[], delta: 1 | -1): Promise<void>;
}

export function counterWrites(db: Kysely<Database>): CounterWrites {
  const m = db.withTables<MonitorTables>();
  // Each compiled on first use: a caller that needs one statement does not pay for the other.
  let run: Shape | undefined;
  let finished: Shape | undefined;
  const runShape = () =>
    shapeOf((slot) =>
      m
        .insertInto("element_run_stats")
        .values({ element_id: slot(0), total_runs: slot(1), app: slot(2), bytes: slot(3) })
        .onConflict((oc) =>
          oc.column("element_id").doUpdateSet({
            total_runs: sql`element_run_stats.total_runs + ${slot(1)}`,
            bytes: sql`element_run_stats.bytes + ${slot(3)}`,
          }),
        ),
    );
  const finishedShape = () =>
    shapeOf((slot) =>
      m
        .insertInto("run_status_counts")
        .values({
          app: slot(0),
          space: slot(1),
          element_id: slot(2),
          trigger_type: slot(3),
          status: slot(4),
          n: slot(5),
          bytes: slot(6),
        })
        .onConflict((oc) =>
          oc.columns(["app", "space", "element_id", "trigger_type", "status"]).doUpdateSet({
            n: sql`run_status_counts.n + ${slot(5)}`,
            bytes: sql`run_status_counts.bytes + ${slot(6)}`,
          }),
        ),
    );
  return {
    async countRun(tx, app, elementId, runs, bytes) {
      run ??= runShape();
      await tx.executeQuery(bound(run, [Number(elementId), runs, app, bytes]));
    },
    async countFinished(tx, keys, delta) {
      finished ??= finishedShape();
      const shape = finished;
      for (const g of counterDeltas(keys, delta))
        await tx.executeQuery(
          bound(shape, [
            g.app,
            g.space,
            Number(g.element_id),
            g.trigger_type,
            g.status,
            g.n,
            g.bytes,
          ]),
        );
    },
  };
}

/** Monitoring reads (docs/monitoring.md) over Kysely for both dialects. */
export function monitorMethods(
  db: Kysely<Database>,
  dialect: Dialect,
  textIndexMinRuns = TEXT_INDEX_MIN_RUNS,
): MonitorMethods {
  return {
    monitorRuns: (scope, elementId, q) =>
      monitorRuns(db, dialect, textIndexMinRuns, scope, elementId, q),
    monitorFlows: (scope) => monitorFlows(db, scope),
    listFlows: (scope) => listFlows(db, scope),
  };
}

/** The overview of a scope's flows: release, run count and newest run of each. */
async function monitorFlows(db: Kysely<Database>, scope: Scope): Promise<FlowOverviewRow[]> {
  const rows = await db
    .withTables<MonitorTables>()
    .selectFrom("elements as e")
    .innerJoin("folders as f", "f.id", "e.folder_id")
    .leftJoin("flow_revisions as r", (j) =>
      j.onRef("r.element_id", "=", "e.id").onRef("r.version", "=", "e.release_version"),
    )
    .leftJoin("element_run_stats as s", "s.element_id", "e.id")
    .select(ELEMENT_COLUMNS)
    .select(["r.name as revision_name", "s.total_runs"])
    // Newest run per element: one index probe each (runs_mon_created, read backwards).
    .select((eb) =>
      eb
        .selectFrom("runs as lr")
        .select("lr.id")
        .where("lr.app", "=", scope.app)
        .where("lr.space", "=", scope.space)
        .whereRef("lr.element_id", "=", "e.id")
        .orderBy("lr.create_time", "desc")
        .orderBy("lr.id", "desc")
        .limit(1)
        .as("last_run_id"),
    )
    .where("e.app", "=", scope.app)
    .where("e.space", "=", scope.space)
    .where("e.type", "=", "DPL")
    .orderBy("f.path")
    .orderBy("e.name")
    .execute();
  const last = await runsByIds(
    db,
    rows.flatMap((r) => (r.last_run_id ? [r.last_run_id] : [])),
  );
  return rows.map((r) => ({
    element: toElement(r),
    revisionName: r.revision_name ?? null,
    totalRuns: Number(r.total_runs ?? 0),
    lastRun: (r.last_run_id && last.get(r.last_run_id)) || null,
  }));
}

/** Every flow of a scope, or of every scope, with its count of unfinished in-process runs. */
async function listFlows(db: Kysely<Database>, scope: ScopeFilter): Promise<FlowListRow[]> {
  const elements = await db
    .selectFrom("elements as e")
    .innerJoin("folders as f", "f.id", "e.folder_id")
    .select(ELEMENT_COLUMNS)
    .where("e.type", "=", "DPL")
    .$if(scope !== null, (qb) =>
      qb.where("e.app", "=", scope?.app ?? "").where("e.space", "=", scope?.space ?? ""),
    )
    .orderBy("e.app")
    .orderBy("e.space")
    .orderBy("f.path")
    .orderBy("e.name")
    .execute();
  // Literal statuses (constants) so that SQLite can prove the partial index runs_unfinished
  // applies; bound parameters would hide that from its planner. Only unfinished runs are read.
  const busy = await db
    .selectFrom("runs")
    .select((eb) => ["element_id", eb.fn.countAll<number>().as("n")])
    .where("status", "in", [sql.lit("QUEUED"), sql.lit("STARTED")])
    .where("in_process", "=", 1)
    .where("element_type", "=", "DPL")
    .$if(scope !== null, (qb) =>
      qb.where("app", "=", scope?.app ?? "").where("space", "=", scope?.space ?? ""),
    )
    .groupBy("element_id")
    .execute();
  const byElement = new Map(busy.map((b) => [String(b.element_id), Number(b.n)]));
  return elements.map((e) => ({
    element: toElement(e),
    inProcessCount: byElement.get(String(e.id)) ?? 0,
  }));
}
