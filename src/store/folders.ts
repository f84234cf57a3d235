import type { Kysely } from "kysely";
import { checkNewFolderPath } from "../elements/paths.ts";
import { badRequest } from "../errors.ts";
import { newId } from "../ids.ts";
import type { Folder, Scope } from "./model.ts";
import type { Database } from "./schema.ts";

/** The folder at `path` in the scope, if it exists (on the store's connection or a transaction). */
export function folderAt(
  db: Kysely<Database>,
  scope: Scope,
  path: string,
): Promise<Folder | undefined> {
  return db
    .selectFrom("folders")
    .select(["id", "path"])
    .where("app", "=", scope.app)
    .where("space", "=", scope.space)
    .where("path", "=", path)
    .executeTakeFirst();
}

/**
 * The folder at `path` with every missing ancestor created (docs/dataflow-service.md: deploy and
 * upload create folders); concurrent creators meet on the unique key and keep the first row. A
 * path too deep or long to create is a 400 naming `path`.
 * Works on the store's connection and inside a transaction (an import) alike.
 */
export async function ensureFolderAt(
  db: Kysely<Database>,
  scope: Scope,
  path: string,
  now: number,
): Promise<Folder> {
  const existing = await folderAt(db, scope, path);
  if (existing) return existing;
  // Bounded before anything is written (docs/dataflow-service.md, "Folders").
  const problem = checkNewFolderPath(path);
  if (problem) throw badRequest(`path ${problem}`);
  const segments = path.split("/").filter(Boolean);
  let current = "";
  for (let i = 0; i <= segments.length; i++) {
    current = i === 0 ? "/" : `${current === "/" ? "" : current}/${segments[i - 1]}`;
    await db
      .insertInto("folders")
      .values({
        id: newId(now),
        app: scope.app,
        space: scope.space,
        path: current,
        created_at: now,
      })
      .onConflict((oc) => oc.columns(["app", "space", "path"]).doNothing())
      .execute();
  }
  const made = await folderAt(db, scope, path);
  if (!made) throw new Error(`folder ${path} vanished after creation`);
  return made;
}
