import { type Kysely, sql } from "kysely";
import { countFinished } from "./kysely-monitor.ts";
import { FINISHED } from "./model.ts";
import { endAll } from "./run-ends.ts";
import { endColumns } from "./run-write-rows.ts";
import type { Database } from "./schema.ts";
import { endBytes } from "./stored-bytes.ts";
import type { ElementType, Run, RunEnd, StartedAfter, Store } from "./types.ts";

/**
 * The runs a node recorded STARTED, for its sweep of those it does not execute (docs/cluster.md,
 * "Runs STARTED here that nothing executes").
 */
export function startedHereMethods(
  db: Kysely<Database>,
): Pick<Store, "startedOn" | "endStartedOn" | "endedAmong"> {
  return {
    startedOn: (nodeId, cutoff, limit, after) => startedOn(db, nodeId, cutoff, limit, after),
    endStartedOn: (id, nodeId, end) => endStartedOn(db, id, nodeId, end),
    endedAmong: (ids) => endedAmong(db, ids),
  };
}

/**
 * The runs a node holds that have ended meanwhile (docs/cluster.md, "Ends a node did not hear"):
 * by primary key, only the ID read.
 */
async function endedAmong(db: Kysely<Database>, ids: readonly string[]): Promise<string[]> {
  if (ids.length === 0) return [];
  const rows = await db
    .selectFrom("runs")
    .select("id")
    .where("id", "in", ids)
    .where("status", "in", FINISHED.map(sql.lit))
    .execute();
  return rows.map((r) => r.id);
}

/**
 * Through a partial index of unfinished runs, whose condition is repeated literally for SQLite to
 * use one (runs_unfinished: status, create_time; PostgreSQL's planner may take
 * runs_element_unfinished): the STARTED runs of every node, few at any time, read up to the
 * cutoff. A run starts after it is created, so `create_time <= cutoff` drops none that
 * `start_time <= cutoff` keeps; it bounds the index range. The node is tested on the rows found:
 * an index of its own would cost every run's writes.
 */
export function startedOnQuery(
  db: Kysely<Database>,
  nodeId: string,
  cutoff: number,
  limit: number,
  after?: StartedAfter,
) {
  let q = db
    .selectFrom("runs")
    .select(["id", "element_type", "create_time"])
    .where("status", "in", [sql.lit("QUEUED"), sql.lit("STARTED")])
    .where("status", "=", sql.lit("STARTED"))
    .where("create_time", "<=", cutoff)
    .where("start_time", "<=", cutoff)
    .where("node_id", "=", nodeId);
  // The next page: after the last run of the one before, in (create_time, id) order. The range
  // on create_time alone keeps the index's bound; the ID breaks ties on the rows found.
  if (after)
    q = q
      .where("create_time", ">=", after.createTime)
      .where((eb) => eb.or([eb("create_time", ">", after.createTime), eb("id", ">", after.id)]));
  return q.orderBy("create_time").orderBy("id").limit(limit);
}

async function startedOn(
  db: Kysely<Database>,
  nodeId: string,
  cutoff: number,
  limit: number,
  after?: StartedAfter,
): Promise<Pick<Run, "id" | "elementType" | "createTime">[]> {
  const rows = await startedOnQuery(db, nodeId, cutoff, limit, after).execute();
  return rows.map((r) => ({
    id: r.id,
    elementType: r.element_type as ElementType,
    createTime: Number(r.create_time),
  }));
}

/**
 * Ends the run only while it is still STARTED by `nodeId`, in one conditional `UPDATE` with its
 * monitoring counters: an end recorded meanwhile (its own, a terminate) wins, and is not counted
 * twice.
 */
function endStartedOn(
  db: Kysely<Database>,
  id: string,
  nodeId: string,
  end: RunEnd,
): Promise<boolean> {
  return db.transaction().execute(async (tx) => {
    const c = endColumns(end, 0);
    const ended = (await endAll(tx, [{ id, c }], nodeId)).get(id);
    if (!ended) return false;
    await countFinished(tx, [{ ...ended, bytes: endBytes(c) }], 1);
    return true;
  });
}
