import type { Kysely } from "kysely";
import type { ScriptPin } from "./revision-types.ts";
import type { Database } from "./schema.ts";

/** The store's side of environment clean-up (docs/script-dependencies.md, "Caching"). */
export interface ScriptEnvStore {
  /**
   * Every environment hash still in use, in every scope: the newest version of each existing PY
   * element, and every version a flow revision pinned when it last became the release (a rollback
   * may make it the release again).
   */
  envHashesInUse(): Promise<Set<string>>;
}

export function scriptEnvMethods(db: Kysely<Database>): ScriptEnvStore {
  return {
    async envHashesInUse() {
      const newest = await db
        .selectFrom("script_versions as sv")
        .innerJoin("elements as e", "e.id", "sv.element_id")
        .select("sv.env_hash")
        .where("sv.env_hash", "is not", null)
        .where((eb) =>
          eb(
            "sv.version",
            "=",
            eb
              .selectFrom("script_versions as last")
              .select((l) => l.fn.max("last.version").as("v"))
              .whereRef("last.element_id", "=", "sv.element_id"),
          ),
        )
        .execute();
      const hashes = new Set(newest.map((r) => r.env_hash).filter((h) => h !== null));
      const pinned = await pinnedVersions(db);
      for (let i = 0; i < pinned.length; i += 500) {
        const part = pinned.slice(i, i + 500);
        const rows = await db
          .selectFrom("script_versions")
          .select("env_hash")
          .where("env_hash", "is not", null)
          .where((eb) =>
            eb.or(
              part.map((p) =>
                eb.and([eb("element_id", "=", p.elementId), eb("version", "=", p.version)]),
              ),
            ),
          )
          .execute();
        for (const r of rows) if (r.env_hash !== null) hashes.add(r.env_hash);
      }
      return hashes;
    },
  };
}

async function pinnedVersions(
  db: Kysely<Database>,
): Promise<{ elementId: number; version: number }[]> {
  const rows = await db
    .selectFrom("flow_revisions")
    .select("script_pins")
    .where("script_pins", "is not", null)
    .execute();
  const seen = new Map<string, { elementId: number; version: number }>();
  for (const r of rows) {
    for (const p of JSON.parse(r.script_pins ?? "[]") as ScriptPin[]) {
      const elementId = Number(p.elementId);
      if (Number.isSafeInteger(elementId))
        seen.set(`${elementId}:${p.version}`, { elementId, version: p.version });
    }
  }
  return [...seen.values()];
}
