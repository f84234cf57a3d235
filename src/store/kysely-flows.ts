import type { Kysely } from "kysely";
import type { Database } from "./schema.ts";
import type { Element, FlowRevision, FlowStatus, NewFlowDeploy, Store } from "./types.ts";

type FlowMethods = Pick<Store, "deployFlow" | "renameRevision" | "setFlowStatus" | "flowRevision">;

/** Flow revisions and release state (docs/dataflow-service.md), over Kysely for both dialects. */
export function flowMethods(
  db: Kysely<Database>,
  elementById: (id: number) => Promise<Element>,
): FlowMethods {
  return {
    async deployFlow(d: NewFlowDeploy) {
      const { id, version } = await db.transaction().execute(async (tx) => {
        const existing = await tx
          .selectFrom("elements")
          .select(["id", "release_version"])
          .where("app", "=", d.scope.app)
          .where("space", "=", d.scope.space)
          .where("folder_id", "=", d.folderId)
          .where("type", "=", "DPL")
          .where("name", "=", d.name)
          .executeTakeFirst();
        let elementId: number;
        if (existing) {
          elementId = Number(existing.id);
        } else {
          const inserted = await tx
            .insertInto("elements")
            .values({
              app: d.scope.app,
              space: d.scope.space,
              folder_id: d.folderId,
              type: "DPL",
              name: d.name,
              description: d.description ? JSON.stringify(d.description) : null,
              status: "DRAFT",
              kind: null,
              content: null,
              release_version: null,
              release_user: null,
              release_time: null,
              created_at: d.now,
              updated_at: d.now,
            })
            .returning("id")
            .executeTakeFirstOrThrow();
          elementId = Number(inserted.id);
        }
        const last = await tx
          .selectFrom("flow_revisions")
          .select((eb) => eb.fn.max("version").as("v"))
          .where("element_id", "=", elementId)
          .executeTakeFirst();
        const next = Number(last?.v ?? 0) + 1;
        await tx
          .insertInto("flow_revisions")
          .values({
            element_id: elementId,
            version: next,
            name: d.revisionName,
            flow: JSON.stringify(d.flow),
            configure: JSON.stringify(d.configure ?? {}),
            created_at: d.now,
            user_id: typeof d.user?.userId === "string" ? d.user.userId : null,
          })
          .execute();
        await tx
          .updateTable("elements")
          .set({
            release_version: next,
            release_user: d.user ? JSON.stringify(d.user) : null,
            release_time: d.now,
            updated_at: d.now,
            ...(d.description ? { description: JSON.stringify(d.description) } : {}),
          })
          .where("id", "=", elementId)
          .execute();
        return { id: elementId, version: next };
      });
      return { element: await elementById(id), version };
    },

    async renameRevision(elementId, name) {
      const last = await db
        .selectFrom("flow_revisions")
        .select((eb) => eb.fn.max("version").as("v"))
        .where("element_id", "=", Number(elementId))
        .executeTakeFirst();
      if (last?.v == null) return false;
      await db
        .updateTable("flow_revisions")
        .set({ name })
        .where("element_id", "=", Number(elementId))
        .where("version", "=", Number(last.v))
        .execute();
      return true;
    },

    async setFlowStatus(elementId, status: FlowStatus, user, now) {
      await db
        .updateTable("elements")
        .set({
          status,
          // lastRelease is the last deploy or activate; a deactivation leaves it (docs/monitoring.md).
          ...(status === "APPROVED"
            ? { release_user: user ? JSON.stringify(user) : null, release_time: now }
            : {}),
          updated_at: now,
        })
        .where("id", "=", Number(elementId))
        .execute();
    },

    async flowRevision(elementId, version): Promise<FlowRevision | undefined> {
      const row = await db
        .selectFrom("flow_revisions")
        .selectAll()
        .where("element_id", "=", Number(elementId))
        .where("version", "=", version)
        .executeTakeFirst();
      if (!row) return undefined;
      return {
        elementId: String(row.element_id),
        version: row.version,
        name: row.name,
        flow: JSON.parse(row.flow),
        configure: JSON.parse(row.configure),
        createdAt: Number(row.created_at),
        userId: row.user_id,
      };
    },
  };
}
