import type { Kysely, Selectable } from "kysely";
import type { FlowRevisionInfo, ReleaseAction, ReleaseEvent, ScriptPin } from "./revision-types.ts";
import type { Database, FlowReleaseTable, FlowRevisionTable } from "./schema.ts";
import type { FlowStatus, Store } from "./types.ts";

type RevisionReads = Pick<Store, "flowRevisions" | "releaseHistory">;

const pins = (text: string | null): ScriptPin[] | null =>
  text == null ? null : (JSON.parse(text) as ScriptPin[]);

export function toRevisionInfo(
  row: Omit<Selectable<FlowRevisionTable>, "flow" | "configure">,
): FlowRevisionInfo {
  return {
    elementId: String(row.element_id),
    version: row.version,
    name: row.name,
    createdAt: Number(row.created_at),
    userId: row.user_id,
    releasedAt: row.released_at == null ? null : Number(row.released_at),
    scriptPins: pins(row.script_pins),
  };
}

function toReleaseEvent(row: Selectable<FlowReleaseTable>): ReleaseEvent {
  return {
    id: String(row.id),
    elementId: String(row.element_id),
    version: row.version,
    action: row.action as ReleaseAction,
    status: row.status as FlowStatus,
    userId: row.user_id,
    at: Number(row.at),
    scriptPins: pins(row.script_pins),
  };
}

/** Revision lists and the release history (docs/dataflow-service.md), newest first. */
export function revisionReads(db: Kysely<Database>): RevisionReads {
  return {
    async flowRevisions(elementId, limit, offset) {
      const id = Number(elementId);
      const [count, rows] = await Promise.all([
        db
          .selectFrom("flow_revisions")
          .select((eb) => eb.fn.countAll().as("n"))
          .where("element_id", "=", id)
          .executeTakeFirst(),
        db
          .selectFrom("flow_revisions")
          .select([
            "element_id",
            "version",
            "name",
            "created_at",
            "user_id",
            "released_at",
            "script_pins",
          ])
          .where("element_id", "=", id)
          .orderBy("version", "desc")
          .limit(limit)
          .offset(offset)
          .execute(),
      ]);
      return { total: Number(count?.n ?? 0), items: rows.map(toRevisionInfo) };
    },

    async releaseHistory(elementId, limit, offset) {
      const id = Number(elementId);
      const [count, rows] = await Promise.all([
        db
          .selectFrom("flow_releases")
          .select((eb) => eb.fn.countAll().as("n"))
          .where("element_id", "=", id)
          .executeTakeFirst(),
        db
          .selectFrom("flow_releases")
          .selectAll()
          .where("element_id", "=", id)
          .orderBy("id", "desc")
          .limit(limit)
          .offset(offset)
          .execute(),
      ]);
      return { total: Number(count?.n ?? 0), items: rows.map(toReleaseEvent) };
    },
  };
}
