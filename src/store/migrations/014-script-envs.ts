import type { Kysely } from "kysely";
import type { Dialect } from "../types.ts";

/**
 * Elements' own dependencies (docs/script-dependencies.md): a script version records the
 * environment it resolved to at upload, `env_hash` (its directory under `DATA_DIR/envs`, indexed:
 * the clean-up asks which hashes are still used) and `env` (JSON: the resolved `name==version`
 * list and the declared project names, from which a node that lacks the directory rebuilds it).
 * Null: the version declares no dependencies. Both plain text columns, in both dialects.
 */
export async function up(db: Kysely<unknown>, _dialect: Dialect): Promise<void> {
  await db.schema.alterTable("script_versions").addColumn("env_hash", "text").execute();
  await db.schema.alterTable("script_versions").addColumn("env", "text").execute();
  await db.schema
    .createIndex("script_versions_env_hash")
    .on("script_versions")
    .column("env_hash")
    .execute();
}
