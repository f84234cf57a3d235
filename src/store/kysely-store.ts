import { CompiledQuery, type Kysely } from "kysely";
import { createBatcher } from "./batch.ts";
import { createElementLookup, createNewestVersionLookup } from "./element-lookups.ts";
import { ensureFolderAt, folderAt } from "./folders.ts";
import { bundleMethods } from "./kysely-bundles.ts";
import { flowMethods } from "./kysely-flows.ts";
import { countFinished, countRun, monitorMethods } from "./kysely-monitor.ts";
import { revisionReads } from "./kysely-revisions.ts";
import { scheduleMethods } from "./kysely-schedules.ts";
import { scriptMethods } from "./kysely-scripts.ts";
import { ELEMENT_COLUMNS, toElement, toRun, toScript } from "./rows.ts";
import { createRunWrites, runRow } from "./run-writes.ts";
import type { Database } from "./schema.ts";
import type {
  Dialect,
  Element,
  ElementType,
  Run,
  RunStatus,
  Scope,
  ScriptElement,
  Store,
} from "./types.ts";
import { FINISHED } from "./types.ts";

/** The Store over Kysely: one implementation, the dialect decides SQLite or PostgreSQL. */
export function createKyselyStore(
  db: Kysely<Database>,
  dialect: Dialect,
  onClose: () => Promise<void>,
): Store & { db: Kysely<Database> } {
  const elements = () =>
    db.selectFrom("elements as e").innerJoin("folders as f", "f.id", "e.folder_id");

  const folderByPath = (scope: Scope, path: string) => folderAt(db, scope, path);
  const ensureFolder = (scope: Scope, path: string, now: number) =>
    ensureFolderAt(db, scope, path, now);

  const writes = createRunWrites(db);
  // Reads of single runs (result lookups, waiters woken by one NOTIFY batch, workers) made in
  // one turn share one statement (docs/architecture.md, "Group commit").
  const readRun = createBatcher<string, Run | undefined>({
    max: 500,
    async run(ids) {
      const rows = await db
        .selectFrom("runs")
        .selectAll()
        .where("id", "in", [...new Set(ids)])
        .execute();
      const byId = new Map(rows.map((r) => [r.id, toRun(r)]));
      // Each caller gets its own object: two waiters of one run must not share a mutable one.
      return ids.map((id) => {
        const run = byId.get(id);
        return run && { ...run };
      });
    },
  });

  const elementByNumber = async (id: number): Promise<Element> =>
    toElement(
      await elements().select(ELEMENT_COLUMNS).where("e.id", "=", id).executeTakeFirstOrThrow(),
    );

  return {
    ...flowMethods(db, elementByNumber),
    ...bundleMethods(db),
    ...revisionReads(db),
    ...scriptMethods(db),
    ...monitorMethods(db, dialect),
    ...scheduleMethods(db),
    db,
    dialect,
    folderByPath,
    ensureFolder,

    async folderById(scope, id) {
      return db
        .selectFrom("folders")
        .select(["id", "path"])
        .where("app", "=", scope.app)
        .where("space", "=", scope.space)
        .where("id", "=", id)
        .executeTakeFirst();
    },

    findElements: createElementLookup(db),
    newestScriptVersion: createNewestVersionLookup(db),

    async elementById(scope, id) {
      const num = numericId(id);
      if (num === undefined) return undefined;
      const row = await elements()
        .select(ELEMENT_COLUMNS)
        .where("e.app", "=", scope.app)
        .where("e.space", "=", scope.space)
        .where("e.id", "=", num)
        .executeTakeFirst();
      return row && toElement(row);
    },

    async scriptById(scope, id): Promise<ScriptElement | undefined> {
      const num = numericId(id);
      if (num === undefined) return undefined;
      const row = await elements()
        .select([...ELEMENT_COLUMNS, "e.content"])
        .where("e.app", "=", scope.app)
        .where("e.space", "=", scope.space)
        .where("e.id", "=", num)
        .where("e.type", "=", "PY")
        .executeTakeFirst();
      return row && toScript(row);
    },

    insertRun: writes.insertRun,

    async insertRunsWith(runs, also) {
      if (runs.length === 0) return;
      await db.transaction().execute(async (tx) => {
        await tx
          .insertInto("runs")
          .values(runs.map((r) => runRow(r)))
          .execute();
        const flows = new Map<string, number>();
        for (const r of runs)
          if (r.elementType === "DPL") flows.set(r.elementId, (flows.get(r.elementId) ?? 0) + 1);
        // Sorted, so that two transactions never wait on each other's counter rows crosswise.
        for (const id of [...flows.keys()].sort()) await countRun(tx, id, flows.get(id));
        await also({
          executeSql: async (text, values) => {
            const r = await tx.executeQuery(CompiledQuery.raw(text, values ?? []));
            return { rows: [...r.rows] };
          },
        });
      });
    },

    startRun: writes.startRun,

    endRun: writes.endRun,

    async getRun(scope, id): Promise<Run | undefined> {
      const run = await readRun(id);
      // Another scope's run is a run that does not exist (docs/auth.md).
      if (!run || (scope && (run.scope.app !== scope.app || run.scope.space !== scope.space)))
        return undefined;
      return run;
    },

    async deleteRuns(scope, ids) {
      if (ids.length === 0) return new Set<string>();
      // The rows and their status counters (docs/monitoring.md) go together.
      const rows = await db.transaction().execute(async (tx) => {
        const deleted = await tx
          .deleteFrom("runs")
          .where("id", "in", ids)
          .where("status", "in", [...FINISHED])
          .$if(scope !== null, (q) =>
            q.where("app", "=", scope?.app ?? "").where("space", "=", scope?.space ?? ""),
          )
          .returning(["id", "app", "space", "element_id", "trigger_type", "status"])
          .execute();
        await countFinished(tx, deleted, -1);
        return deleted;
      });
      return new Set(rows.map((r) => r.id));
    },

    async unfinishedRuns(statuses: readonly RunStatus[], nodeId?: string | null) {
      let q = db.selectFrom("runs").selectAll().where("status", "in", statuses);
      if (nodeId !== undefined)
        q = nodeId === null ? q.where("node_id", "is", null) : q.where("node_id", "=", nodeId);
      const rows = await q.orderBy("create_time").execute();
      return rows.map(toRun);
    },

    async childRuns(parentRunId) {
      const rows = await db
        .selectFrom("runs")
        .selectAll()
        .where("parent_run_id", "=", parentRunId)
        .execute();
      return rows.map(toRun);
    },

    async heartbeat(nodeId, now) {
      await db
        .insertInto("nodes")
        .values({ id: nodeId, started_at: now, heartbeat_at: now })
        .onConflict((oc) => oc.column("id").doUpdateSet({ heartbeat_at: now }))
        .execute();
    },

    async orphanedRuns(cutoff) {
      const rows = await db
        .selectFrom("runs")
        .selectAll()
        .where("status", "=", "STARTED")
        .where((eb) =>
          eb.or([
            eb("node_id", "is", null),
            eb(
              "node_id",
              "not in",
              eb.selectFrom("nodes").select("id").where("heartbeat_at", ">=", cutoff),
            ),
          ]),
        )
        .execute();
      return rows.map(toRun);
    },

    async queuedBefore(cutoff, limit) {
      const rows = await db
        .selectFrom("runs")
        .select(["id", "element_type"])
        .where("status", "=", "QUEUED")
        .where("create_time", "<", cutoff)
        .orderBy("create_time")
        .limit(limit)
        .execute();
      return rows.map((r) => ({ id: r.id, elementType: r.element_type as ElementType }));
    },

    close: onClose,
  };
}

/** Element IDs are integers; anything else (or beyond 15 digits, past int64 and exact doubles) is unknown. */
function numericId(id: string): number | undefined {
  return /^\d{1,15}$/.test(id) ? Number(id) : undefined;
}
