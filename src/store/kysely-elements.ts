import type { Kysely } from "kysely";
import { createElementLookup } from "./element-lookups.ts";
import { ensureFolderAt, folderAt } from "./folders.ts";
import { ELEMENT_COLUMNS, toElement, toScript } from "./rows.ts";
import type { Database } from "./schema.ts";
import type { Element, Scope, ScriptElement, Store } from "./types.ts";

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
    findElements: createElementLookup(db),
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

/** Element IDs are integers; anything else (or beyond 15 digits, past int64 and exact doubles) is unknown. */
function numericId(id: string): number | undefined {
  return /^\d{1,15}$/.test(id) ? Number(id) : undefined;
}
