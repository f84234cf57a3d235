import type { Kysely } from "kysely";
import { createBatcher } from "./batch.ts";
import { ELEMENT_COLUMNS, type ElementRow, toElement } from "./rows.ts";
import type { Database } from "./schema.ts";
import type { Element, ElementQuery, Scope } from "./types.ts";

type Lookup = { scope: Scope; query: ElementQuery };

/** At most this many lookups per batch. */
const MAX_BATCH = 200;

/**
 * Elements by name. Every run request looks its element up; the lookups of one event-loop turn
 * (and those made while a statement is under way) share one statement, as run writes do
 * (docs/architecture.md, "Group commit"): under load that is one round trip for many requests
 * instead of one each, and always a fresh read, never a cache another node could make stale. At
 * most two elements are answered per lookup: two mean the name is ambiguous.
 */
export function createElementLookup(
  db: Kysely<Database>,
): (scope: Scope, query: ElementQuery) => Promise<Element[]> {
  const find = createBatcher<Lookup, Element[]>({
    max: MAX_BATCH,
    async run(lookups) {
      const keyOf = (app: string, space: string, type: string, name: string) =>
        JSON.stringify([app, space, type, name]);
      // One statement per scope and type (under load usually one), each an equality on the
      // index's leading columns and a list of names, which both dialects serve from the index.
      const groups = new Map<string, { l: Lookup; names: Set<string> }>();
      for (const l of lookups) {
        const g = JSON.stringify([l.scope.app, l.scope.space, l.query.type]);
        const group = groups.get(g) ?? { l, names: new Set<string>() };
        group.names.add(l.query.name);
        groups.set(g, group);
      }
      const found = await Promise.all(
        [...groups.values()].map(({ l, names }) =>
          db
            .selectFrom("elements as e")
            .innerJoin("folders as f", "f.id", "e.folder_id")
            .select(ELEMENT_COLUMNS)
            .where("e.app", "=", l.scope.app)
            .where("e.space", "=", l.scope.space)
            .where("e.type", "=", l.query.type)
            .where("e.name", "in", [...names])
            .orderBy("e.id")
            .execute(),
        ),
      );
      const byKey = new Map<string, ElementRow[]>();
      for (const r of found.flat()) {
        const k = keyOf(r.app, r.space, r.type, r.name);
        byKey.set(k, [...(byKey.get(k) ?? []), r]);
      }
      return lookups.map((l) =>
        (byKey.get(keyOf(l.scope.app, l.scope.space, l.query.type, l.query.name)) ?? [])
          .filter((r) => l.query.folderId === undefined || String(r.folder_id) === l.query.folderId)
          .slice(0, 2)
          .map(toElement),
      );
    },
  });
  return (scope, query) => find({ scope, query });
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
