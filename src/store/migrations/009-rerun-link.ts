import type { Kysely } from "kysely";
import type { Dialect } from "../types.ts";

/**
 * A run started by a re-run or a resume names the run it repeats (docs/dataflow-service.md,
 * "Re-run and resume"): two nullable columns, so that a QUEUED re-run already shows its origin and
 * a resume reads the failed run's node outputs by that ID. No index: the link is read with the run.
 */
export async function up(db: Kysely<unknown>, _dialect: Dialect): Promise<void> {
  await db.schema.alterTable("runs").addColumn("rerun_of", "text").execute();
  await db.schema.alterTable("runs").addColumn("rerun_kind", "text").execute();
}
