import type { Kysely } from "kysely";
import type { Dialect } from "../types.ts";

/**
 * `runs.files_removed`: JSON `{time, reason}` when the working directory an ended run kept on its
 * node was removed before its `fileCleanup` said, for SCRIPT_KEPT_BYTES_PER_APP or the data
 * directory's floor (docs/security.md, "Disk", "Kept directories"); null for every other run.
 */
export async function up(db: Kysely<unknown>, _dialect: Dialect): Promise<void> {
  await db.schema.alterTable("runs").addColumn("files_removed", "text").execute();
}
