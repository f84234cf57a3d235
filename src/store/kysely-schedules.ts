import type { Kysely } from "kysely";
import type { Database } from "./schema.ts";
import type { ErrorHandlerResult, Store } from "./types.ts";

type ScheduleMethods = Pick<
  Store,
  | "flowReleases"
  | "loadScheduleState"
  | "claimScheduleTick"
  | "claimScheduleTicks"
  | "pruneScheduleFires"
  | "scheduledRunSince"
  | "addErrorHandlerResult"
  | "errorHandlerResults"
  | "pruneErrorHandlerResults"
>;

/** Cron state and error-handler outcomes (docs/flow-graph.md), over Kysely for both dialects. */
export function scheduleMethods(db: Kysely<Database>): ScheduleMethods {
  return {
    async flowReleases() {
      const rows = await db
        .selectFrom("elements as e")
        .innerJoin("flow_revisions as r", (j) =>
          j.onRef("r.element_id", "=", "e.id").onRef("r.version", "=", "e.release_version"),
        )
        .select(["e.id", "e.app", "e.space", "e.name", "e.status", "r.version", "r.configure"])
        .where("e.type", "=", "DPL")
        .execute();
      return rows.map((r) => ({
        elementId: String(r.id),
        scope: { app: r.app, space: r.space },
        elementName: r.name,
        approved: r.status === "APPROVED",
        version: Number(r.version),
        configureJson: r.configure,
      }));
    },

    async loadScheduleState() {
      const rows = await db
        .selectFrom("schedule_state")
        .select(["schedule_id", "last_run_at"])
        .execute();
      return new Map(rows.map((r) => [r.schedule_id, Number(r.last_run_at)]));
    },

    async claimScheduleTick(scheduleId, tick) {
      return (await claimTicks(db, [{ scheduleId, tick }])).size > 0;
    },

    claimScheduleTicks: (items) => claimTicks(db, items),

    async pruneScheduleFires(before) {
      const r = await db.deleteFrom("schedule_fires").where("tick", "<", before).executeTakeFirst();
      return Number(r.numDeletedRows);
    },

    async scheduledRunSince(scope, elementId, since) {
      // The runs' scope index (app, space, element_id, create_time) finds it.
      const row = await db
        .selectFrom("runs")
        .select("id")
        .where("app", "=", scope.app)
        .where("space", "=", scope.space)
        .where("element_id", "=", Number(elementId))
        .where("create_time", ">=", since)
        .where("trigger_type", "=", "SCHEDULED")
        .limit(1)
        .executeTakeFirst();
      return row !== undefined;
    },

    async addErrorHandlerResult(runId, result) {
      await db
        .insertInto("error_handler_results")
        .values({ run_id: runId, result: JSON.stringify(result) })
        .execute();
    },

    async errorHandlerResults(runId) {
      const rows = await db
        .selectFrom("error_handler_results")
        .select("result")
        .where("run_id", "=", runId)
        .orderBy("id")
        .execute();
      return rows.map((r) => JSON.parse(r.result) as ErrorHandlerResult);
    },

    async pruneErrorHandlerResults() {
      // Runs are deleted through POST /run/delete, which knows nothing of this table.
      const r = await db
        .deleteFrom("error_handler_results")
        .where("run_id", "not in", db.selectFrom("runs").select("id"))
        .executeTakeFirst();
      return Number(r.numDeletedRows);
    },
  };
}

/** Rows per statement: 2 parameters each, far below either dialect's parameter limit. */
const CHUNK = 500;

/**
 * Claims ticks across the cluster: the primary key of `schedule_fires` lets one insert of each
 * (schedule, tick) land, whichever node sends it first. Many ticks go in one statement, so 10,000
 * schedules due at once cost 20 inserts, not 10,000. Returns the `scheduleId@tick` keys won.
 */
async function claimTicks(
  db: Kysely<Database>,
  items: readonly { scheduleId: string; tick: number }[],
): Promise<Set<string>> {
  const won = new Set<string>();
  for (let i = 0; i < items.length; i += CHUNK) {
    const part = items.slice(i, i + CHUNK);
    const rows = await db
      .insertInto("schedule_fires")
      .values(part.map((c) => ({ schedule_id: c.scheduleId, tick: c.tick })))
      .onConflict((oc) => oc.columns(["schedule_id", "tick"]).doNothing())
      .returning(["schedule_id", "tick"])
      .execute();
    if (rows.length === 0) continue;
    // lastRunAt only moves forward, whatever order concurrent claims of later ticks land in.
    const latest = new Map<string, number>();
    for (const r of rows) {
      const tick = Number(r.tick);
      won.add(`${r.schedule_id}@${tick}`);
      latest.set(r.schedule_id, Math.max(latest.get(r.schedule_id) ?? tick, tick));
    }
    await db
      .insertInto("schedule_state")
      .values([...latest].map(([schedule_id, last_run_at]) => ({ schedule_id, last_run_at })))
      .onConflict((oc) =>
        oc
          .column("schedule_id")
          .doUpdateSet((eb) => ({ last_run_at: eb.ref("excluded.last_run_at") }))
          .whereRef("schedule_state.last_run_at", "<", "excluded.last_run_at"),
      )
      .execute();
  }
  return won;
}
