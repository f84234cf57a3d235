import type { Kysely } from "kysely";
import { createBatcher } from "./batch.ts";
import { ensureFolderAt, folderAt } from "./folders.ts";
import { ELEMENT_COLUMNS, numericId, toElement, toScript } from "./rows.ts";
import type { Database } from "./schema.ts";
import { bound, shapeOf } from "./shapes.ts";
import type { Element, ElementQuery, Scope, ScriptElement, Store } from "./types.ts";

type ElementMethods = Pick<
  Store,
  "folderByPath" | "ensureFolder" | "folderById" | "findElements" | "elementById" | "scriptById"
>;

/** Folders and element lookups over Kysely for both dialects; another scope's element is none. */
export function elementMethods(db: Kysely<Database>): ElementMethods {
  return {
    folderByPath: (scope, path) => folderAt(db, scope, path),
    ensureFolder: (scope, path, now) => ensureFolderAt(db, scope, path, now),
    folderById: (scope, id) => folderById(db, scope, id),
    findElements: elementLookup(db),
    elementById: (scope, id) => elementById(db, scope, id),
    scriptById: (scope, id) => scriptById(db, scope, id),
  };
}

/** An element by its numeric id, whatever its scope: for writes that have just made or found it. */
export async function elementByNumber(db: Kysely<Database>, id: number): Promise<Element> {
  return toElement(
    await elements(db).select(ELEMENT_COLUMNS).where("e.id", "=", id).executeTakeFirstOrThrow(),
  );
}

const elements = (db: Kysely<Database>) =>
  db.selectFrom("elements as e").innerJoin("folders as f", "f.id", "e.folder_id");

type Lookup = { scope: Scope; query: ElementQuery };

/** At most this many lookups per batch. */
const MAX_LOOKUPS = 200;

/**
 * Elements by name. Every run request looks its element up, and under load the requests of one
 * event-loop turn mostly ask for the same element: the lookups of one turn (and those made while
 * a read is under way) are answered by one statement per distinct lookup, usually one, as run
 * writes are grouped (docs/architecture.md, "Group commit"). Always a fresh read, never a cache
 * another node could make stale. Each statement is the lookup's own (its folder in SQL, at most
 * two rows: two mean the name is ambiguous), so a name that many folders share costs what it did
 * alone, and a statement that fails fails only the lookups that made it.
 */
function elementLookup(
  db: Kysely<Database>,
): (scope: Scope, query: ElementQuery) => Promise<Element[]> {
  const one = lookUp(db);
  const keyOf = ({ scope, query }: Lookup) =>
    JSON.stringify([scope.app, scope.space, query.type, query.name, query.folderId ?? null]);
  const find = createBatcher<Lookup, Element[]>({
    max: MAX_LOOKUPS,
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

/**
 * One lookup's statement, compiled once for each of its two forms (shapes.ts): every run request
 * makes one.
 */
function lookUp(db: Kysely<Database>): (l: Lookup) => Promise<Element[]> {
  const form = (inFolder: boolean) =>
    shapeOf((slot) => {
      let q = elements(db)
        .select(ELEMENT_COLUMNS)
        .where("e.app", "=", slot(0))
        .where("e.space", "=", slot(1))
        .where("e.type", "=", slot(2))
        .where("e.name", "=", slot(3));
      if (inFolder) q = q.where("e.folder_id", "=", slot(4));
      return q.limit(slot(5));
    });
  const anywhere = form(false);
  const inFolder = form(true);
  return async ({ scope, query }) => {
    const shape = query.folderId === undefined ? anywhere : inFolder;
    const values = [scope.app, scope.space, query.type, query.name, query.folderId, 2];
    const { rows } = await db.executeQuery<Parameters<typeof toElement>[0]>(bound(shape, values));
    return rows.map(toElement);
  };
}

async function folderById(db: Kysely<Database>, scope: Scope, id: string) {
  return db
    .selectFrom("folders")
    .select(["id", "path"])
    .where("app", "=", scope.app)
    .where("space", "=", scope.space)
    .where("id", "=", id)
    .executeTakeFirst();
}

async function elementById(
  db: Kysely<Database>,
  scope: Scope,
  id: string,
): Promise<Element | undefined> {
  const num = numericId(id);
  if (num === undefined) return undefined;
  const row = await elements(db)
    .select(ELEMENT_COLUMNS)
    .where("e.app", "=", scope.app)
    .where("e.space", "=", scope.space)
    .where("e.id", "=", num)
    .executeTakeFirst();
  return row && toElement(row);
}

async function scriptById(
  db: Kysely<Database>,
  scope: Scope,
  id: string,
): Promise<ScriptElement | undefined> {
  const num = numericId(id);
  if (num === undefined) return undefined;
  const row = await elements(db)
    .select([...ELEMENT_COLUMNS, "e.content"])
    .where("e.app", "=", scope.app)
    .where("e.space", "=", scope.space)
    .where("e.id", "=", num)
    .where("e.type", "=", "PY")
    .executeTakeFirst();
  return row && toScript(row);
}
