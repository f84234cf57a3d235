import type { Kysely } from "kysely";
import { sql } from "kysely";
import type { Dialect } from "../types.ts";

/**
 * Artifacts (docs/artifacts.md): the files a run kept, in the shared database, so every API node
 * of a cluster serves those of a run that executed on a worker.
 * - `artifacts`: one row per file, its bytes in the row (bounded by ARTIFACT_MAX_FILE_BYTES).
 * - `artifact_sets`: one row per collected run, written after its files: while it is absent the
 *   collection is under way (or the run kept nothing); it lists what was skipped and why.
 */
export async function up(db: Kysely<unknown>, dialect: Dialect): Promise<void> {
  const big = dialect === "postgres" ? "bigint" : "integer";
  const blob = sql.raw(dialect === "postgres" ? "bytea" : "blob");
  await db.schema
    .createTable("artifacts")
    .addColumn("run_id", "text", (c) => c.notNull())
    .addColumn("name", "text", (c) => c.notNull())
    .addColumn("node_id", "text")
    .addColumn("size", big, (c) => c.notNull())
    .addColumn("content_type", "text", (c) => c.notNull())
    .addColumn("sha256", "text", (c) => c.notNull())
    .addColumn("created_at", big, (c) => c.notNull())
    .addColumn("content", blob, (c) => c.notNull())
    .addPrimaryKeyConstraint("artifacts_pk", ["run_id", "name"])
    .execute();
  await db.schema
    .createTable("artifact_sets")
    .addColumn("run_id", "text", (c) => c.primaryKey())
    .addColumn("collected_at", big, (c) => c.notNull())
    .addColumn("files", "integer", (c) => c.notNull())
    .addColumn("bytes", big, (c) => c.notNull())
    .addColumn("skipped", "text", (c) => c.notNull())
    .execute();
}
