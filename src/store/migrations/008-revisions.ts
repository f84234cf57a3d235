import { createHash } from "node:crypto";
import { type Kysely, sql } from "kysely";
import type { Dialect } from "../types.ts";

/**
 * Releases you can reproduce and undo (docs/dataflow-service.md, "Revisions and releases";
 * docs/script-service.md, "Script versions"):
 * - `script_versions`: every upload of a PY element, with its bytes, sha256, size, who and when.
 *   Existing scripts become version 1 (their current bytes, their creation time).
 * - `flow_revisions.released_at` / `script_pins`: when a revision last became the release and the
 *   script versions it pinned then. Every revision stored before this migration was released by
 *   its deploy, so `released_at` is its creation time; it pinned nothing (its script nodes use the
 *   newest script version until the flow is activated again).
 * - `flow_releases`: the release history (deploy that releases, activate, rollback, deactivate);
 *   each existing revision gets the DEPLOY event that released it.
 */
export async function up(db: Kysely<unknown>, dialect: Dialect): Promise<void> {
  const big = dialect === "postgres" ? "bigint" : "integer";
  const blob = dialect === "postgres" ? "bytea" : "blob";

  await db.schema
    .createTable("script_versions")
    .addColumn("element_id", big, (c) => c.notNull().references("elements.id").onDelete("cascade"))
    .addColumn("version", "integer", (c) => c.notNull())
    .addColumn("kind", "text", (c) => c.notNull())
    .addColumn("content", sql.raw(blob), (c) => c.notNull())
    .addColumn("sha256", "text", (c) => c.notNull())
    .addColumn("size", big, (c) => c.notNull())
    .addColumn("user_id", "text")
    .addColumn("created_at", big, (c) => c.notNull())
    .addPrimaryKeyConstraint("script_versions_pk", ["element_id", "version"])
    .execute();

  await db.schema
    .createTable("flow_releases")
    .addColumn("id", dialect === "postgres" ? "bigserial" : "integer", (c) =>
      dialect === "postgres" ? c.primaryKey() : c.primaryKey().autoIncrement(),
    )
    .addColumn("element_id", big, (c) => c.notNull().references("elements.id").onDelete("cascade"))
    .addColumn("version", "integer")
    .addColumn("action", "text", (c) => c.notNull())
    .addColumn("status", "text", (c) => c.notNull())
    .addColumn("user_id", "text")
    .addColumn("at", big, (c) => c.notNull())
    .addColumn("script_pins", "text")
    .execute();
  await db.schema
    .createIndex("flow_releases_element")
    .on("flow_releases")
    .columns(["element_id", "id"])
    .execute();

  await db.schema.alterTable("flow_revisions").addColumn("released_at", big).execute();
  await db.schema.alterTable("flow_revisions").addColumn("script_pins", "text").execute();
  await sql`update flow_revisions set released_at = created_at`.execute(db);
  await sql`insert into flow_releases (element_id, version, action, status, user_id, at)
    select r.element_id, r.version, 'DEPLOY', coalesce(e.status, 'DRAFT'), r.user_id, r.created_at
    from flow_revisions r join elements e on e.id = r.element_id
    order by r.created_at, r.element_id, r.version`.execute(db);

  // sha256 is computed here: SQLite has no digest function.
  const scripts = await sql<{
    id: number | string;
    kind: string | null;
    content: Uint8Array | null;
    created_at: number | string;
  }>`select id, kind, content, created_at from elements where type = 'PY'`.execute(db);
  for (const s of scripts.rows) {
    const content = s.content ?? new Uint8Array();
    const sha = createHash("sha256").update(content).digest("hex");
    await sql`insert into script_versions
      (element_id, version, kind, content, sha256, size, user_id, created_at)
      values (${Number(s.id)}, 1, ${s.kind ?? "module"}, ${content}, ${sha}, ${content.byteLength},
        null, ${Number(s.created_at)})`.execute(db);
  }
}
