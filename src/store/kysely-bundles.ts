import { type Kysely, sql, type Transaction } from "kysely";
import { cronCount } from "../flows/cron-triggers.ts";
import { activeSchedules, checkSchedules } from "./app-bounds.ts";
import { ensureFolderAt } from "./folders.ts";
import { checkDryImportBounds, checkImportBounds } from "./import-bounds.ts";
import { writePins } from "./kysely-keep.ts";
import { toRevisionInfo } from "./kysely-revisions.ts";
import { addVersion } from "./kysely-scripts.ts";
import type { FlowRevision } from "./revision-types.ts";
import { ELEMENT_COLUMNS, toElement } from "./rows.ts";
import type { Database } from "./schema.ts";
import type { Dialect, ImportFlow, ImportWrites, Scope, Store } from "./types.ts";

type BundleMethods = Pick<
  Store,
  "elementsUnder" | "allFlowRevisions" | "applyImport" | "checkImport"
>;

/** The reads an export makes and the one transaction of an import (docs/export-import.md). */
export function bundleMethods(db: Kysely<Database>, dialect: Dialect): BundleMethods {
  return {
    async elementsUnder(scope, path) {
      // The folder itself and every folder below it; substr, not LIKE, so `_` and `%` in a
      // folder name match only themselves.
      const prefix = path === "/" ? "/" : `${path}/`;
      const rows = await db
        .selectFrom("elements as e")
        .innerJoin("folders as f", "f.id", "e.folder_id")
        .select(ELEMENT_COLUMNS)
        .where("e.app", "=", scope.app)
        .where("e.space", "=", scope.space)
        .where((eb) =>
          eb.or([
            eb("f.path", "=", path),
            eb(sql`substr(f.path, 1, ${prefix.length})`, "=", prefix),
          ]),
        )
        .orderBy("f.path")
        .orderBy("e.type")
        .orderBy("e.name")
        .execute();
      return rows.map(toElement);
    },

    async allFlowRevisions(elementId, from = 1, limit?: number): Promise<FlowRevision[]> {
      const rows = await db
        .selectFrom("flow_revisions")
        .selectAll()
        .where("element_id", "=", Number(elementId))
        .where("version", ">=", from)
        .orderBy("version")
        .$if(limit !== undefined, (q) => q.limit(limit ?? 0))
        .execute();
      return rows.map((row) => ({
        ...toRevisionInfo(row),
        flow: JSON.parse(row.flow),
        configure: JSON.parse(row.configure),
      }));
    },

    async applyImport(scope, writes: ImportWrites, now) {
      // One transaction: an element that appeared since the plan was made (a unique key) or a
      // revision written meanwhile (the primary key) fails it whole, and nothing is written.
      return db.transaction().execute(async (tx) => {
        const schedulesBefore = await checkImportBounds(tx, dialect, scope, writes);
        for (const s of writes.scripts) {
          const folderId = (await ensureFolderAt(tx, scope, s.path, now)).id;
          const row = await tx
            .insertInto("elements")
            .values({
              ...newElement(scope, folderId, "PY", s.name, now),
              kind: s.kind,
              content: s.content,
            })
            .returning("id")
            .executeTakeFirstOrThrow();
          // Its version 1 here, as an upload's: flows that run it find a version to run.
          await addVersion(tx, Number(row.id), { ...s, now, userId: writes.userId ?? null });
        }
        const ids: string[] = [];
        for (const f of writes.flows) ids.push(await writeFlow(tx, scope, f, now));
        if (schedulesBefore !== null && (await activeSchedules(tx, scope.app)) > schedulesBefore)
          await checkSchedules(tx, scope.app, writes.bounds, "this import (nothing was written)");
        return ids;
      });
    },

    checkImport: (scope, writes) => checkDryImportBounds(db, scope, writes),
  };
}

function newElement(scope: Scope, folderId: string, type: "PY" | "DPL", name: string, now: number) {
  return {
    app: scope.app,
    space: scope.space,
    folder_id: folderId,
    type,
    name,
    description: null,
    status: null,
    kind: null,
    content: null,
    release_version: null,
    release_user: null,
    release_time: null,
    created_at: now,
    updated_at: now,
  };
}

/**
 * Revisions per insert: seven parameters each, so one statement stays far below SQLite's 32,766
 * and PostgreSQL's 65,535 however many revisions a file holds (docs/export-import.md).
 */
const REVISIONS_PER_INSERT = 500;

/** A new flow element, or an existing one's missing revisions, and the release when it moves. */
async function writeFlow(
  tx: Transaction<Database>,
  scope: Scope,
  f: ImportFlow,
  now: number,
): Promise<string> {
  let id: number;
  if (f.elementId === null) {
    const folderId = (await ensureFolderAt(tx, scope, f.path, now)).id;
    const row = await tx
      .insertInto("elements")
      .values({
        ...newElement(scope, folderId, "DPL", f.name, now),
        description: f.description ? JSON.stringify(f.description) : null,
        status: f.status,
      })
      .returning("id")
      .executeTakeFirstOrThrow();
    id = Number(row.id);
  } else id = Number(f.elementId);
  for (let i = 0; i < f.revisions.length; i += REVISIONS_PER_INSERT) {
    const part = f.revisions.slice(i, i + REVISIONS_PER_INSERT);
    await tx
      .insertInto("flow_revisions")
      .values(
        part.map((r) => ({
          element_id: id,
          version: r.version,
          name: r.name,
          flow: JSON.stringify(r.flow),
          configure: JSON.stringify(r.configure),
          created_at: r.createdAt,
          user_id: r.userId,
        })),
      )
      .execute();
  }
  if (f.releaseVersion !== null)
    await moveRelease(tx, id, { ...f, releaseVersion: f.releaseVersion }, now);
  return String(id);
}

/**
 * The release an import sets, recorded like every release change (docs/export-import.md,
 * "Script versions and releases"): an `IMPORT` event in the history, the revision's `released_at`.
 * It pins nothing: its script nodes run the newest version, which is the imported content.
 */
async function moveRelease(
  tx: Transaction<Database>,
  id: number,
  f: ImportFlow & { releaseVersion: number },
  now: number,
) {
  const userId = typeof f.user?.userId === "string" ? f.user.userId : null;
  const rev = await tx
    .selectFrom("flow_revisions")
    .select("configure")
    .where("element_id", "=", id)
    .where("version", "=", f.releaseVersion)
    .executeTakeFirst();
  await tx
    .updateTable("elements")
    .set({
      release_version: f.releaseVersion,
      release_crons: rev ? cronCount(JSON.parse(rev.configure)) : 0,
      release_user: f.user ? JSON.stringify(f.user) : null,
      release_time: now,
      updated_at: now,
    })
    .where("id", "=", id)
    .execute();
  await tx
    .updateTable("flow_revisions")
    .set({ released_at: now, script_pins: null })
    .where("element_id", "=", id)
    .where("version", "=", f.releaseVersion)
    .execute();
  await writePins(tx, id, f.releaseVersion, null);
  const el = await tx
    .selectFrom("elements")
    .select("status")
    .where("id", "=", id)
    .executeTakeFirst();
  await tx
    .insertInto("flow_releases")
    .values({
      element_id: id,
      version: f.releaseVersion,
      action: "IMPORT",
      status: el?.status ?? "DRAFT",
      user_id: userId,
      at: now,
      script_pins: null,
    })
    .execute();
}
