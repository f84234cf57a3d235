import { type Kysely, sql } from "kysely";
import type { Dialect } from "../types.ts";

/**
 * The script versions each flow revision pins, one row per pinned version (docs/script-service.md,
 * "How many versions are kept"): an upload past `LIMIT_VERSIONS_PER_SCRIPT` must not remove a
 * version a kept revision pins, and finding those in `flow_revisions.script_pins` (JSON) would
 * read every revision of the scope, graphs and all, on every upload. The rows follow the
 * revision's `script_pins` (written with it) and go with it: removing a revision removes them.
 * Filled here from the pins already stored.
 *
 * `flow_revisions_released`: which of a flow's revisions were released, in version order, from an
 * index alone (docs/dataflow-service.md, "How many revisions are kept"). `released_at` follows the
 * graph in the row, and SQLite reaches it only by following the chain of the graph's overflow
 * pages: cheap while they are in memory, a read of every graph scanned when they are not (a
 * deploy that is refused scans every revision of its flow).
 */
export async function up(db: Kysely<unknown>, dialect: Dialect): Promise<void> {
  const big = dialect === "postgres" ? "bigint" : "integer";
  await db.schema
    .createTable("revision_pins")
    .addColumn("element_id", big, (c) => c.notNull())
    .addColumn("version", "integer", (c) => c.notNull())
    .addColumn("script_id", big, (c) => c.notNull())
    .addColumn("script_version", "integer", (c) => c.notNull())
    .addPrimaryKeyConstraint("revision_pins_pk", [
      "element_id",
      "version",
      "script_id",
      "script_version",
    ])
    .addForeignKeyConstraint(
      "revision_pins_revision",
      ["element_id", "version"],
      "flow_revisions",
      ["element_id", "version"],
      (fk) => fk.onDelete("cascade"),
    )
    .execute();
  await db.schema
    .createIndex("revision_pins_script")
    .on("revision_pins")
    .columns(["script_id", "script_version"])
    .execute();

  await db.schema
    .createIndex("flow_revisions_released")
    .on("flow_revisions")
    .columns(["element_id", "version", "released_at"])
    .execute();

  const pinned = await sql<{
    element_id: number | string;
    version: number;
    script_pins: string;
  }>`select element_id, version, script_pins from flow_revisions
     where script_pins is not null`.execute(db);
  for (const r of pinned.rows) {
    const rows = pinRows(Number(r.element_id), r.version, JSON.parse(r.script_pins));
    for (const p of rows)
      await sql`insert into revision_pins (element_id, version, script_id, script_version)
        values (${p.element_id}, ${p.version}, ${p.script_id}, ${p.script_version})`.execute(db);
  }
}

/** One row per distinct (script, version) a revision pins; pins naming no element are left out. */
export function pinRows(
  elementId: number,
  version: number,
  pins: unknown,
): { element_id: number; version: number; script_id: number; script_version: number }[] {
  const seen = new Map<string, { script_id: number; script_version: number }>();
  for (const p of Array.isArray(pins) ? pins : []) {
    const pin = p as { elementId?: unknown; version?: unknown };
    const scriptId = Number(pin.elementId);
    const scriptVersion = Number(pin.version);
    if (!Number.isSafeInteger(scriptId) || !Number.isSafeInteger(scriptVersion)) continue;
    seen.set(`${scriptId}:${scriptVersion}`, {
      script_id: scriptId,
      script_version: scriptVersion,
    });
  }
  return [...seen.values()].map((s) => ({ element_id: elementId, version, ...s }));
}
