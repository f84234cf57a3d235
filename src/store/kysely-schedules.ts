import type { Kysely } from "kysely";
import type { Database } from "./schema.ts";
import type { ErrorHandlerResult, Store } from "./types.ts";

type ScheduleMethods = Pick<
  Store,
  | "flowReleases"
  | "loadScheduleState"
  | "claimScheduleTick"
  | "pruneScheduleFires"
  | "addErrorHandlerResult"
  | "errorHandlerResults"
  | "pruneErrorHandlerResults"
>;

/** Cron state and error-handler outcomes (contract §7), over Kysely for both dialects. */
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
      // The primary key lets one insert of (schedule, tick) land, whichever node sends it first.
      const won = await db
        .insertInto("schedule_fires")
        .values({ schedule_id: scheduleId, tick })
        .onConflict((oc) => oc.columns(["schedule_id", "tick"]).doNothing())
        .returning("schedule_id")
        .execute();
      if (won.length === 0) return false;
      // lastRunAt only moves forward, whatever order concurrent claims of later ticks land in.
      await db
        .insertInto("schedule_state")
        .values({ schedule_id: scheduleId, last_run_at: tick })
        .onConflict((oc) =>
          oc
            .column("schedule_id")
            .doUpdateSet({ last_run_at: tick })
            .where("schedule_state.last_run_at", "<", tick),
        )
        .execute();
      return true;
    },

    async pruneScheduleFires(before) {
      const r = await db.deleteFrom("schedule_fires").where("tick", "<", before).executeTakeFirst();
      return Number(r.numDeletedRows);
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
