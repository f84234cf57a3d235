import type { ExpressionBuilder, Kysely } from "kysely";
import { type Liveness, liveSince } from "./node-liveness.ts";
import type { Database } from "./schema.ts";
import type { Dialect } from "./types.ts";

/**
 * Which owed notifications a node may take (docs/error-handlers.md, "Durable"): those of any
 * other node when this process owns the database (embedded: every other owner was a previous
 * life of it), else those of nodes that are not `live` (no heartbeat within its timeout).
 */
export interface OwnerRule {
  nodeId: string;
  takeAll: boolean;
  /** Which owners are alive (by the database's clock: node-liveness.ts). */
  live: Liveness;
}

/**
 * The error-handler notifications owed by FAILUREs (`runs.notify_node`, migration 021): a narrow
 * store on the runs table. The mark is written with the run's end (run-write-rows.ts, endColumns); here it is
 * taken over from dead nodes and cleared. Every method is one statement.
 */
export interface NoticeStore {
  /**
   * Takes up to `limit` owed notifications of runs ended at `endedSince` or later from owners the
   * rule allows, the apps in turn and each app's oldest end first: one UPDATE … RETURNING, so two
   * nodes never take the same run.
   */
  claim(rule: OwnerRule, endedSince: number, limit: number): Promise<string[]>;
  /** Clears the run's mark while this node holds it; false when it holds none. */
  clear(runId: string, nodeId: string): Promise<boolean>;
  /** Clears the marks the rule allows of runs ended before `cutoff`: too old to send; their IDs. */
  dropBefore(rule: OwnerRule, cutoff: number): Promise<string[]>;
  /**
   * Of `runIds`, those whose mark `nodeId` still holds: `due` (ended at `cutoff` or later) and
   * `old` (before). One SELECT.
   */
  held(
    nodeId: string,
    runIds: readonly string[],
    cutoff: number,
  ): Promise<{ due: string[]; old: string[] }>;
}

export function createNoticeStore(db: Kysely<Database>, dialect: Dialect): NoticeStore {
  return {
    async claim(rule, endedSince, limit) {
      if (limit <= 0) return [];
      // The apps take turns (each app's oldest end first, then each one's second, …), so one
      // app's many owed runs do not hold back another app's.
      const ranked = db
        .selectFrom("runs")
        .select((eb) => [
          "id",
          "end_time",
          eb.fn
            .agg<number>("row_number")
            .over((ob) => ob.partitionBy("app").orderBy("end_time"))
            .as("turn"),
        ])
        .where("notify_node", "is not", null)
        .where("end_time", ">=", endedSince)
        .where((eb) => takeable(eb, dialect, rule));
      const chosen = db
        .selectFrom(ranked.as("c"))
        .select("c.id")
        .orderBy("c.turn")
        .orderBy("c.end_time")
        .limit(limit);
      let pick = db.selectFrom("runs").select("id").where("id", "in", chosen);
      // PostgreSQL: a row another node is taking is skipped, not waited for.
      if (dialect === "postgres") pick = pick.forUpdate().skipLocked();
      const rows = await db
        .updateTable("runs")
        .set({ notify_node: rule.nodeId })
        .where("id", "in", pick)
        .where("notify_node", "is not", null)
        .where((eb) => takeable(eb, dialect, rule))
        .returning("id")
        .execute();
      return rows.map((r) => r.id);
    },
    async clear(runId, nodeId) {
      const r = await db
        .updateTable("runs")
        .set({ notify_node: null })
        .where("id", "=", runId)
        .where("notify_node", "=", nodeId)
        .executeTakeFirst();
      return Number(r.numUpdatedRows) > 0;
    },
    async dropBefore(rule, cutoff) {
      const rows = await db
        .updateTable("runs")
        .set({ notify_node: null })
        .where("notify_node", "is not", null)
        .where("end_time", "<", cutoff)
        .where((eb) => takeable(eb, dialect, rule))
        .returning("id")
        .execute();
      return rows.map((r) => r.id);
    },
    async held(nodeId, runIds, cutoff) {
      if (runIds.length === 0) return { due: [], old: [] };
      const rows = await db
        .selectFrom("runs")
        .select(["id", "end_time"])
        .where("notify_node", "=", nodeId)
        .where("id", "in", runIds)
        .execute();
      const due: string[] = [];
      const old: string[] = [];
      for (const r of rows) (Number(r.end_time) >= cutoff ? due : old).push(r.id);
      return { due, old };
    },
  };
}

/** The owner is another node, and (unless the rule takes all) one that stopped beating. */
function takeable(eb: ExpressionBuilder<Database, "runs">, dialect: Dialect, rule: OwnerRule) {
  const other = eb("notify_node", "<>", rule.nodeId);
  if (rule.takeAll) return other;
  return eb.and([
    other,
    eb(
      "notify_node",
      "not in",
      eb
        .selectFrom("nodes")
        .select("id")
        .where("heartbeat_at", ">=", liveSince(dialect, rule.live)),
    ),
  ]);
}
