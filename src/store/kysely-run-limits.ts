import { type Kysely, type SqlBool, sql, type Transaction } from "kysely";
import { toRun } from "./rows.ts";
import type { RunLimitStore, StartableRun } from "./run-limit-types.ts";
import type { Database } from "./schema.ts";
import type { Dialect, Run } from "./types.ts";

// The condition of the partial indexes of unfinished runs (migrations 001 and 013), repeated in
// every read: SQLite uses a partial index only for a query that states its condition, and does not
// infer it from `status = 'STARTED'` (without it, each claim scans every run ever recorded). The
// values are literals: a bound parameter does not match the index's condition either.
const UNFINISHED = sql<SqlBool>`status IN ('QUEUED', 'STARTED')`;

export function runLimitMethods(db: Kysely<Database>, dialect: Dialect): RunLimitStore {
  return {
    claimLimited: (id, startTime, nodeId) =>
      db.transaction().execute((tx) => claim(tx, dialect, id, startTime, nodeId)),
    startableRuns: (elementId, limit = 500) => startable(db, elementId, limit),
    queuedRunsByApp: () => queuedByApp(db),
  };
}

async function queuedByApp(db: Kysely<Database>): Promise<Map<string, number>> {
  const rows = await db
    .selectFrom("runs")
    .select((eb) => ["app", eb.fn.countAll<number>().as("n")])
    .where(UNFINISHED)
    .where("status", "=", sql.lit("QUEUED"))
    .groupBy("app")
    .execute();
  return new Map(rows.map((r) => [r.app, Number(r.n)]));
}

async function claim(
  tx: Transaction<Database>,
  dialect: Dialect,
  id: string,
  startTime: number,
  nodeId: string | null,
): Promise<Run | undefined> {
  const run = await tx
    .selectFrom("runs")
    .select(["element_id", "run_limit"])
    .where("id", "=", id)
    .where("status", "=", "QUEUED")
    .where("run_limit", "is not", null)
    .executeTakeFirst();
  if (!run || run.run_limit === null) return undefined;
  const element = run.element_id;
  // One claimer per element at a time across the cluster: the counts below and the update are
  // then one step (read committed: each statement after the lock sees every committed claim).
  // SQLite has one writer, and this transaction holds it.
  if (dialect === "postgres")
    await sql`SELECT pg_advisory_xact_lock(hashtext('sluice-run-limit'), hashtext(${String(element)}))`.execute(
      tx,
    );
  const started = await tx
    .selectFrom("runs")
    .select((eb) => eb.fn.countAll<string | number>().as("n"))
    .where("element_id", "=", element)
    .where(UNFINISHED)
    .where("status", "=", "STARTED")
    .executeTakeFirstOrThrow();
  // Runs created before this one go first; counting at most `limit` of them is enough to decide.
  const ahead = await tx
    .selectFrom((eb) =>
      eb
        .selectFrom("runs")
        .select("id")
        .where("element_id", "=", element)
        .where(UNFINISHED)
        .where("status", "=", "QUEUED")
        .where("id", "<", id)
        .limit(run.run_limit ?? 0)
        .as("older"),
    )
    .select((eb) => eb.fn.countAll<string | number>().as("n"))
    .executeTakeFirstOrThrow();
  if (Number(started.n) + Number(ahead.n) >= run.run_limit) return undefined;
  const row = await tx
    .updateTable("runs")
    .set({ status: "STARTED", start_time: startTime, node_id: nodeId })
    .where("id", "=", id)
    .where("status", "=", "QUEUED")
    .returningAll()
    .executeTakeFirst();
  return row ? toRun(row) : undefined;
}

async function startable(
  db: Kysely<Database>,
  elementId: string | undefined,
  limit: number,
): Promise<StartableRun[]> {
  const only = elementId === undefined ? sql`` : sql`AND element_id = ${Number(elementId)}`;
  // Position among the element's QUEUED runs (creation order) plus its STARTED runs: within the
  // limit, the run would be claimed if its job arrived now.
  const { rows } = await sql<{ id: string; element_type: string; app: string; space: string }>`
    SELECT q.id, q.element_type, q.app, q.space FROM (
      SELECT id, element_id, element_type, app, space, run_limit,
        row_number() OVER (PARTITION BY element_id ORDER BY id) AS pos
      FROM runs
      WHERE ${UNFINISHED} AND status = 'QUEUED' ${only} AND element_id IN (
        SELECT element_id FROM runs
        WHERE ${UNFINISHED} AND status = 'QUEUED' AND run_limit IS NOT NULL ${only})
    ) q
    WHERE q.run_limit IS NOT NULL
      AND q.pos + (SELECT count(*) FROM runs s
                   WHERE s.element_id = q.element_id AND s.status IN ('QUEUED', 'STARTED')
                     AND s.status = 'STARTED') <= q.run_limit
    ORDER BY q.id
    LIMIT ${limit}`.execute(db);
  return rows.map((r) => ({
    id: r.id,
    elementType: r.element_type === "PY" ? "PY" : "DPL",
    scope: { app: r.app, space: r.space },
  }));
}
