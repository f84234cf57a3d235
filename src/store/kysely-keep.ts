import { type Kysely, type SqlBool, sql, type Transaction } from "kysely";
import type { ScriptPin } from "./revision-types.ts";
import type { Database } from "./schema.ts";
import type { Scope, Store } from "./types.ts";

/**
 * How many revisions a flow and versions a script keep (docs/dataflow-service.md, "How many
 * revisions are kept"; docs/script-service.md, "How many versions are kept"): the write that
 * adds one past the bound removes the oldest that nothing needs, in its own transaction, with
 * one statement scoped to the element's app and space.
 */

/** What a removal found: how many the element held with the new one, and how many went. */
export interface Pruned {
  held: number;
  removed: number;
}

/** Unfinished runs, as literals: SQLite then sees that the partial index of migration 013 applies. */
const UNFINISHED = sql<SqlBool>`r.status in ('QUEUED', 'STARTED')`;

/** Rows per insert of pins: four parameters each, far below either database's limit. */
const PINS_PER_INSERT = 500;

type Tx = Transaction<Database>;

async function held(tx: Tx, table: "flow_revisions" | "script_versions", id: number) {
  const row = await tx
    .selectFrom(table)
    .select((eb) => eb.fn.countAll().as("n"))
    .where("element_id", "=", id)
    .executeTakeFirst();
  return Number(row?.n ?? 0);
}

/**
 * Removes the oldest revisions of a flow beyond `keep` (0: no bound) that are neither the release,
 * nor staged (never released), nor the revision of an unfinished run of the flow.
 */
export async function pruneRevisions(
  tx: Tx,
  scope: Scope,
  elementId: number,
  keep: number,
): Promise<Pruned> {
  if (keep <= 0) return { held: 0, removed: 0 };
  const n = await held(tx, "flow_revisions", elementId);
  if (n <= keep) return { held: n, removed: 0 };
  const done = await tx
    .deleteFrom("flow_revisions")
    .where("element_id", "=", elementId)
    .where("version", "in", (eb) =>
      eb
        .selectFrom("flow_revisions as old")
        .innerJoin("elements as e", "e.id", "old.element_id")
        .select("old.version")
        .where("old.element_id", "=", elementId)
        .where("e.app", "=", scope.app)
        .where("e.space", "=", scope.space)
        .where("old.released_at", "is not", null)
        .where((w) =>
          w.or([
            w("e.release_version", "is", null),
            w("old.version", "<>", w.ref("e.release_version")),
          ]),
        )
        .where(({ not, exists, selectFrom }) =>
          not(
            exists(
              selectFrom("runs as r")
                .select(sql.lit(1).as("one"))
                .whereRef("r.element_id", "=", "old.element_id")
                .where(UNFINISHED)
                .where("r.version", "=", sql<string>`cast(old.version as text)`),
            ),
          ),
        )
        .orderBy("old.version")
        .limit(n - keep),
    )
    .executeTakeFirst();
  return { held: n, removed: Number(done.numDeletedRows) };
}

/**
 * Removes the oldest versions of a script beyond `keep` (0: no bound) that are neither the newest,
 * nor pinned by a flow revision that is kept, nor the version of an unfinished task.
 */
export async function pruneScriptVersions(
  tx: Tx,
  scope: Scope,
  elementId: number,
  newest: number,
  keep: number,
): Promise<Pruned> {
  if (keep <= 0) return { held: 0, removed: 0 };
  const n = await held(tx, "script_versions", elementId);
  if (n <= keep) return { held: n, removed: 0 };
  const done = await tx
    .deleteFrom("script_versions")
    .where("element_id", "=", elementId)
    .where("version", "in", (eb) =>
      eb
        .selectFrom("script_versions as sv")
        .innerJoin("elements as e", "e.id", "sv.element_id")
        .select("sv.version")
        .where("sv.element_id", "=", elementId)
        .where("e.app", "=", scope.app)
        .where("e.space", "=", scope.space)
        .where("sv.version", "<", newest)
        .where(({ not, exists, selectFrom }) =>
          not(
            exists(
              selectFrom("revision_pins as p")
                .select(sql.lit(1).as("one"))
                .whereRef("p.script_id", "=", "sv.element_id")
                .whereRef("p.script_version", "=", "sv.version"),
            ),
          ),
        )
        .where(({ not, exists, selectFrom }) =>
          not(
            exists(
              selectFrom("runs as r")
                .select(sql.lit(1).as("one"))
                .whereRef("r.element_id", "=", "sv.element_id")
                .where(UNFINISHED)
                .where("r.version", "=", sql<string>`cast(sv.version as text)`),
            ),
          ),
        )
        .orderBy("sv.version")
        .limit(n - keep),
    )
    .executeTakeFirst();
  return { held: n, removed: Number(done.numDeletedRows) };
}

/** The pin rows of one revision replaced by `pins` (none: the revision pins nothing). */
export async function writePins(
  tx: Tx,
  elementId: number,
  version: number,
  pins: readonly ScriptPin[] | null,
): Promise<void> {
  await tx
    .deleteFrom("revision_pins")
    .where("element_id", "=", elementId)
    .where("version", "=", version)
    .execute();
  const rows = new Map<string, Database["revision_pins"]>();
  for (const p of pins ?? []) {
    const scriptId = Number(p.elementId);
    if (!Number.isSafeInteger(scriptId)) continue;
    rows.set(`${scriptId}:${p.version}`, {
      element_id: elementId,
      version,
      script_id: scriptId,
      script_version: p.version,
    });
  }
  const all = [...rows.values()];
  for (let i = 0; i < all.length; i += PINS_PER_INSERT)
    await tx
      .insertInto("revision_pins")
      .values(all.slice(i, i + PINS_PER_INSERT))
      .execute();
}

/** Versions per statement of `removedRevisions`: far below either database's parameter limit. */
const VERSIONS_PER_READ = 500;

/** Which of these versions an element still keeps (a re-run checks what it would repeat). */
export function keptMethods(
  db: Kysely<Database>,
): Pick<Store, "keptVersions" | "removedRevisions"> {
  return {
    // Only past revisions are removed, and each was released once: its release history names
    // it (migration 008 recorded a DEPLOY for every revision stored before it).
    async removedRevisions(elementId, versions) {
      const id = Number(elementId);
      const wanted = [...new Set(versions)].filter(Number.isSafeInteger);
      const removed = new Set<number>();
      if (!Number.isSafeInteger(id)) return removed;
      for (let i = 0; i < wanted.length; i += VERSIONS_PER_READ) {
        const rows = await db
          .selectFrom("flow_releases as h")
          .select("h.version")
          .distinct()
          .where("h.element_id", "=", id)
          .where("h.version", "in", wanted.slice(i, i + VERSIONS_PER_READ))
          .where(({ not, exists, selectFrom }) =>
            not(
              exists(
                selectFrom("flow_revisions as r")
                  .select(sql.lit(1).as("one"))
                  .whereRef("r.element_id", "=", "h.element_id")
                  .whereRef("r.version", "=", "h.version"),
              ),
            ),
          )
          .execute();
        for (const r of rows) if (r.version !== null) removed.add(r.version);
      }
      return removed;
    },
    async keptVersions(type, elementId, versions) {
      const id = Number(elementId);
      const wanted = [...new Set(versions)].filter(Number.isSafeInteger);
      if (!Number.isSafeInteger(id) || wanted.length === 0) return new Set();
      const rows = await db
        .selectFrom(type === "DPL" ? "flow_revisions" : "script_versions")
        .select("version")
        .where("element_id", "=", id)
        .where("version", "in", wanted)
        .execute();
      return new Set(rows.map((r) => r.version));
    },
  };
}
