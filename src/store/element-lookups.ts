import type { Kysely } from "kysely";
import { createBatcher } from "./batch.ts";
import { ELEMENT_COLUMNS, toElement } from "./rows.ts";
import type { Database } from "./schema.ts";
import type { Element, ElementQuery, Scope } from "./types.ts";

type Lookup = { scope: Scope; query: ElementQuery };

/** At most this many lookups per batch. */
const MAX_BATCH = 200;

/**
 * Elements by name. Every run request looks its element up, and under load the requests of one
 * event-loop turn mostly ask for the same element: the lookups of one turn (and those made while
 * a read is under way) are answered by one statement per distinct lookup, usually one, as run
 * writes are grouped (docs/architecture.md, "Group commit"). Always a fresh read, never a cache
 * another node could make stale. Each statement is the lookup's own (its folder in SQL, at most
 * two rows: two mean the name is ambiguous), so a name that many folders share costs what it did
 * alone, and a statement that fails fails only the lookups that made it.
 */
export function createElementLookup(
  db: Kysely<Database>,
): (scope: Scope, query: ElementQuery) => Promise<Element[]> {
  const one = (l: Lookup) => lookUp(db, l);
  const keyOf = ({ scope, query }: Lookup) =>
    JSON.stringify([scope.app, scope.space, query.type, query.name, query.folderId ?? null]);
  const find = createBatcher<Lookup, Element[]>({
    max: MAX_BATCH,
    async run(lookups) {
      const distinct = new Map<string, Promise<Element[]>>();
      for (const l of lookups) if (!distinct.has(keyOf(l))) distinct.set(keyOf(l), one(l));
      // Shared answers are copied: a caller may change its array.
      return (await Promise.all(lookups.map((l) => distinct.get(keyOf(l))))).map((r) => [
        ...(r ?? []),
      ]);
    },
    // A failed statement fails its batch; each lookup is then tried alone.
    alone: one,
  });
  return (scope, query) => find({ scope, query });
}

async function lookUp(db: Kysely<Database>, { scope, query }: Lookup): Promise<Element[]> {
  let q = db
    .selectFrom("elements as e")
    .innerJoin("folders as f", "f.id", "e.folder_id")
    .select(ELEMENT_COLUMNS)
    .where("e.app", "=", scope.app)
    .where("e.space", "=", scope.space)
    .where("e.type", "=", query.type)
    .where("e.name", "=", query.name);
  if (query.folderId !== undefined) q = q.where("e.folder_id", "=", query.folderId);
  const rows = await q.limit(2).execute();
  return rows.map(toElement);
}

/**
 * The newest version number of scripts, batched like the lookups above: every accepted task
 * records the version it will run, and the bytes are read only where it runs (cached there by
 * number, src/store/script-cache.ts).
 */
export function createNewestVersionLookup(
  db: Kysely<Database>,
): (elementId: string) => Promise<number | undefined> {
  const find = createBatcher<number, number | undefined>({
    max: MAX_BATCH,
    async run(ids) {
      const rows = await db
        .selectFrom("script_versions")
        .select((eb) => ["element_id", eb.fn.max("version").as("v")])
        .where("element_id", "in", [...new Set(ids)])
        .groupBy("element_id")
        .execute();
      const newest = new Map(rows.map((r) => [Number(r.element_id), Number(r.v)]));
      return ids.map((id) => newest.get(id));
    },
  });
  return async (elementId) => {
    const id = Number(elementId);
    return Number.isSafeInteger(id) ? find(id) : undefined;
  };
}
