import { type Kysely, sql } from "kysely";
import type { Dialect } from "../types.ts";

/** Column types that differ by dialect; every table below takes them from here. */
interface Types {
  dialect: Dialect;
  big: "bigint" | "integer";
  blob: "bytea" | "blob";
}

/** Base schema: folders, elements, flow revisions, runs. Written once for both dialects. */
export async function up(db: Kysely<unknown>, dialect: Dialect): Promise<void> {
  const t: Types = {
    dialect,
    big: dialect === "postgres" ? "bigint" : "integer",
    blob: dialect === "postgres" ? "bytea" : "blob",
  };
  // In this order: elements reference folders, flow revisions reference elements.
  await createFolders(db, t);
  await createElements(db, t);
  await createFlowRevisions(db, t);
  await createRuns(db, t);
}

async function createFolders(db: Kysely<unknown>, { big }: Types): Promise<void> {
  await db.schema
    .createTable("folders")
    .addColumn("id", "text", (c) => c.primaryKey())
    .addColumn("app", "text", (c) => c.notNull())
    .addColumn("space", "text", (c) => c.notNull())
    .addColumn("path", "text", (c) => c.notNull())
    .addColumn("created_at", big, (c) => c.notNull())
    .addUniqueConstraint("folders_scope_path", ["app", "space", "path"])
    .execute();
}

async function createElements(db: Kysely<unknown>, { dialect, big, blob }: Types): Promise<void> {
  await db.schema
    .createTable("elements")
    .addColumn("id", dialect === "postgres" ? "bigserial" : "integer", (c) =>
      dialect === "postgres" ? c.primaryKey() : c.primaryKey().autoIncrement(),
    )
    .addColumn("app", "text", (c) => c.notNull())
    .addColumn("space", "text", (c) => c.notNull())
    .addColumn("folder_id", "text", (c) => c.notNull().references("folders.id"))
    .addColumn("type", "text", (c) => c.notNull())
    .addColumn("name", "text", (c) => c.notNull())
    .addColumn("description", "text")
    .addColumn("status", "text")
    .addColumn("kind", "text")
    .addColumn("content", sql.raw(blob))
    .addColumn("release_version", "integer")
    .addColumn("release_user", "text")
    .addColumn("release_time", big)
    .addColumn("created_at", big, (c) => c.notNull())
    .addColumn("updated_at", big, (c) => c.notNull())
    .addUniqueConstraint("elements_scope_folder_type_name", [
      "app",
      "space",
      "folder_id",
      "type",
      "name",
    ])
    .execute();
  await db.schema
    .createIndex("elements_scope_type_name")
    .on("elements")
    .columns(["app", "space", "type", "name"])
    .execute();
}

async function createFlowRevisions(db: Kysely<unknown>, { big }: Types): Promise<void> {
  await db.schema
    .createTable("flow_revisions")
    .addColumn("element_id", big, (c) => c.notNull().references("elements.id").onDelete("cascade"))
    .addColumn("version", "integer", (c) => c.notNull())
    .addColumn("name", "text", (c) => c.notNull())
    .addColumn("flow", "text", (c) => c.notNull())
    .addColumn("configure", "text", (c) => c.notNull())
    .addColumn("created_at", big, (c) => c.notNull())
    .addColumn("user_id", "text")
    .addPrimaryKeyConstraint("flow_revisions_pk", ["element_id", "version"])
    .execute();
}

async function createRuns(db: Kysely<unknown>, { big }: Types): Promise<void> {
  await db.schema
    .createTable("runs")
    .addColumn("id", "text", (c) => c.primaryKey())
    .addColumn("app", "text", (c) => c.notNull())
    .addColumn("space", "text", (c) => c.notNull())
    .addColumn("element_id", big, (c) => c.notNull())
    .addColumn("element_type", "text", (c) => c.notNull())
    .addColumn("element_name", "text", (c) => c.notNull())
    .addColumn("folder_id", "text", (c) => c.notNull())
    .addColumn("version", "text")
    .addColumn("trigger_type", "text", (c) => c.notNull())
    .addColumn("status", "text", (c) => c.notNull())
    .addColumn("run_name", "text")
    .addColumn("run_param", "text")
    .addColumn("initiator", "text")
    .addColumn("parent_run_id", "text")
    .addColumn("in_process", "integer", (c) => c.notNull().defaultTo(0))
    .addColumn("node_id", "text")
    .addColumn("create_time", big, (c) => c.notNull())
    .addColumn("start_time", big)
    .addColumn("end_time", big)
    .addColumn("duration", big)
    .addColumn("summary", "text")
    .addColumn("result", "text")
    .addColumn("error", "text")
    .addColumn("stdout", "text")
    .addColumn("stderr", "text")
    .addColumn("detail", "text")
    .execute();
  // Runs are listed per element, newest first; unfinished ones are found at restart.
  await db.schema
    .createIndex("runs_scope_element_created")
    .on("runs")
    .columns(["app", "space", "element_id", "create_time"])
    .execute();
  await db.schema
    .createIndex("runs_unfinished")
    .on("runs")
    .columns(["status", "create_time"])
    .where(sql.ref("status"), "in", ["QUEUED", "STARTED"])
    .execute();
  await db.schema.createIndex("runs_parent").on("runs").column("parent_run_id").execute();
}
