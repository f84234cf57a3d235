import { createHash } from "node:crypto";
import type { Kysely, Transaction } from "kysely";
import { bounded, checkNewElements, lockApp } from "./app-bounds.ts";
import { createBatcher } from "./batch.ts";
import { pruneScriptVersions } from "./kysely-keep.ts";
import type { ScriptEnv, ScriptVersion, ScriptVersionInfo } from "./revision-types.ts";
import { numericId } from "./rows.ts";
import type { Database } from "./schema.ts";
import type { Dialect, NewScriptElement, Store } from "./types.ts";

type ScriptMethods = Pick<
  Store,
  "putScript" | "scriptVersions" | "scriptVersion" | "newestScriptVersion"
>;

const INFO = [
  "element_id",
  "version",
  "kind",
  "sha256",
  "size",
  "user_id",
  "created_at",
  "env",
] as const;

function toInfo(row: {
  element_id: number;
  version: number;
  kind: string;
  sha256: string;
  size: number;
  user_id: string | null;
  created_at: number;
  env: string | null;
}): ScriptVersionInfo {
  return {
    elementId: String(row.element_id),
    version: row.version,
    kind: row.kind === "package" ? "package" : "module",
    sha256: row.sha256,
    size: Number(row.size),
    userId: row.user_id,
    createdAt: Number(row.created_at),
    env: row.env === null ? null : (JSON.parse(row.env) as ScriptEnv),
  };
}

/**
 * PY elements and their versions (docs/script-service.md, "Script versions"): every upload that
 * stores bytes (new, or an overwrite) adds a version in the same transaction; `elements.content`
 * keeps the newest bytes, so every read that predates versions reads what it always read.
 */
export function scriptMethods(db: Kysely<Database>, dialect: Dialect): ScriptMethods {
  return {
    newestScriptVersion: newestVersionLookup(db),
    async putScript(el: NewScriptElement, overwrite: boolean) {
      try {
        return await db.transaction().execute((tx) => putScript(tx, dialect, el, overwrite));
      } catch (err) {
        if (err === FULL) return "full" as const;
        throw err;
      }
    },

    async scriptVersions(elementId, limit, offset) {
      const id = Number(elementId);
      const [count, rows] = await Promise.all([
        db
          .selectFrom("script_versions")
          .select((eb) => eb.fn.countAll().as("n"))
          .where("element_id", "=", id)
          .executeTakeFirst(),
        db
          .selectFrom("script_versions")
          .select(INFO)
          .where("element_id", "=", id)
          .orderBy("version", "desc")
          .limit(limit)
          .offset(offset)
          .execute(),
      ]);
      return { total: Number(count?.n ?? 0), items: rows.map(toInfo) };
    },

    async scriptVersion(elementId, version): Promise<ScriptVersion | undefined> {
      let q = db
        .selectFrom("script_versions")
        .select([...INFO, "content"])
        .where("element_id", "=", Number(elementId));
      q =
        version === null ? q.orderBy("version", "desc").limit(1) : q.where("version", "=", version);
      const row = await q.executeTakeFirst();
      return row && { ...toInfo(row), content: new Uint8Array(row.content) };
    },
  };
}

/** Thrown inside an upload's transaction to roll it back: no version may go (answered "full"). */
const FULL = new Error("the script keeps as many versions as it may, and none may go");

async function findScript(tx: Transaction<Database>, el: NewScriptElement) {
  return tx
    .selectFrom("elements")
    .select("id")
    .where("app", "=", el.scope.app)
    .where("space", "=", el.scope.space)
    .where("folder_id", "=", el.folderId)
    .where("type", "=", "PY")
    .where("name", "=", el.name)
    .executeTakeFirst();
}

async function putScript(
  tx: Transaction<Database>,
  dialect: Dialect,
  el: NewScriptElement,
  overwrite: boolean,
): Promise<"created" | "overwritten" | "exists"> {
  let existing = await findScript(tx, el);
  // A new element: the app's lock before any write, then a second look (docs/security.md, "What
  // an app may hold"); past LIMIT_ELEMENTS_PER_APP it throws 28010006.
  if (!existing && bounded(el.bounds?.elements)) {
    await lockApp(tx, dialect, el.scope.app);
    existing = await findScript(tx, el);
    if (!existing) await checkNewElements(tx, el.scope.app, el.bounds, 1, `new script ${el.name}`);
  }
  if (existing && !overwrite) return "exists";
  if (existing) {
    const id = Number(existing.id);
    await tx
      .updateTable("elements")
      .set({ kind: el.kind, content: el.content, updated_at: el.now })
      .where("id", "=", id)
      .execute();
    const newest = await addVersion(tx, id, el);
    // Past the bound, the oldest versions nothing needs go (docs/script-service.md).
    const keep = el.keepVersions ?? 0;
    const pruned = await pruneScriptVersions(tx, el.scope, id, newest, keep);
    if (pruned.held > keep && pruned.removed === 0) throw FULL;
    return "overwritten";
  }
  const inserted = await tx
    .insertInto("elements")
    .values({
      app: el.scope.app,
      space: el.scope.space,
      folder_id: el.folderId,
      type: "PY",
      name: el.name,
      kind: el.kind,
      content: el.content,
      description: null,
      status: null,
      release_version: null,
      release_user: null,
      release_time: null,
      created_at: el.now,
      updated_at: el.now,
    })
    .returning("id")
    .executeTakeFirstOrThrow();
  await addVersion(tx, Number(inserted.id), el);
  return "created";
}

/** The next version of a script, inside the caller's transaction (an upload, an import). */
export async function addVersion(
  tx: Transaction<Database>,
  elementId: number,
  el: Pick<NewScriptElement, "kind" | "content" | "now" | "userId" | "env">,
): Promise<number> {
  const last = await tx
    .selectFrom("script_versions")
    .select((eb) => eb.fn.max("version").as("v"))
    .where("element_id", "=", elementId)
    .executeTakeFirst();
  const version = Number(last?.v ?? 0) + 1;
  await tx
    .insertInto("script_versions")
    .values({
      element_id: elementId,
      version,
      kind: el.kind,
      content: el.content,
      sha256: createHash("sha256").update(el.content).digest("hex"),
      size: el.content.byteLength,
      user_id: el.userId ?? null,
      created_at: el.now,
      env_hash: el.env?.hash ?? null,
      env: el.env ? JSON.stringify(el.env) : null,
    })
    .execute();
  return version;
}

/**
 * The newest version number of scripts, batched like element lookups (src/store/kysely-elements.ts):
 * every accepted task records the version it will run, and the bytes are read only where it runs
 * (cached there by number, src/store/script-cache.ts).
 */
function newestVersionLookup(
  db: Kysely<Database>,
): (elementId: string) => Promise<number | undefined> {
  const find = createBatcher<number, number | undefined>({
    max: 500,
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
    const id = numericId(elementId);
    return id === undefined ? undefined : find(id);
  };
}
