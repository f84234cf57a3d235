import type { Kysely, Transaction } from "kysely";
import { cronCount } from "../flows/cron-triggers.ts";
import {
  activeSchedules,
  bounded,
  checkNewElements,
  lockApp,
  scheduleLimit,
} from "./app-bounds.ts";
import type { Database } from "./schema.ts";
import type { Dialect, ImportFlow, ImportWrites, Scope } from "./types.ts";

/**
 * What an import may do to what its app holds (docs/security.md, "What an app may hold";
 * docs/export-import.md): its new elements (LIMIT_ELEMENTS_PER_APP) and the active schedules its
 * releases add (LIMIT_SCHEDULES_PER_APP), checked by the import in its transaction and by a dry
 * run, which answers the same refusal and writes nothing.
 */

/** Scripts and flows an import creates. */
const createdBy = (writes: ImportWrites): number =>
  writes.scripts.length + writes.flows.filter((f) => f.elementId === null).length;

/**
 * Before an import writes anything: its new elements are refused past the bound; the active
 * schedules before it are answered (null: not checked), to be compared once its releases are
 * written.
 */
export async function checkImportBounds(
  tx: Transaction<Database>,
  dialect: Dialect,
  scope: Scope,
  writes: ImportWrites,
): Promise<number | null> {
  const b = writes.bounds;
  const created = createdBy(writes);
  const elements = created > 0 && bounded(b?.elements);
  const schedules = bounded(b?.schedules) && writes.flows.some((f) => f.releaseVersion !== null);
  if (!elements && !schedules) return null;
  await lockApp(tx, dialect, scope.app);
  await checkNewElements(
    tx,
    scope.app,
    b,
    created,
    `an import of ${created} new elements (nothing was written)`,
  );
  return schedules ? activeSchedules(tx, scope.app) : null;
}

/**
 * A dry run's check: refused (28010006, 28010007) where the import would be, now. The schedules
 * the import's releases add are those it writes (the cron triggers of an APPROVED flow's new
 * release, less those of the release it replaces), counted from the plan instead of written.
 */
export async function checkDryImportBounds(
  db: Kysely<Database>,
  scope: Scope,
  writes: ImportWrites,
): Promise<void> {
  const b = writes.bounds;
  const created = createdBy(writes);
  await checkNewElements(
    db,
    scope.app,
    b,
    created,
    `an import of ${created} new elements (a dry run: nothing was written)`,
  );
  if (!bounded(b?.schedules)) return;
  let added = 0;
  for (const f of writes.flows)
    if (f.releaseVersion !== null) added += await addedCrons(db, scope, f);
  if (added <= 0) return;
  const active = (await activeSchedules(db, scope.app)) + added;
  if (active > b.schedules)
    throw scheduleLimit(
      scope.app,
      active,
      b.schedules,
      "this import (a dry run: nothing was written)",
    );
}

/** The active schedules moving `f`'s release adds (negative: removes), as the import writes it. */
async function addedCrons(db: Kysely<Database>, scope: Scope, f: ImportFlow): Promise<number> {
  const held =
    f.elementId === null
      ? undefined
      : await db
          .selectFrom("elements")
          .select(["status", "release_crons"])
          .where("id", "=", Number(f.elementId))
          .where("app", "=", scope.app)
          .where("space", "=", scope.space)
          .executeTakeFirst();
  if (f.elementId !== null && !held) return 0; // gone since the plan: the import would fail
  // An import sets a new flow's status and leaves an existing one's.
  if ((held ? held.status : f.status) !== "APPROVED") return 0;
  const inFile = f.revisions.find((r) => r.version === f.releaseVersion);
  const stored =
    inFile || f.elementId === null
      ? undefined
      : await db
          .selectFrom("flow_revisions")
          .select("configure")
          .where("element_id", "=", Number(f.elementId))
          .where("version", "=", f.releaseVersion as number)
          .executeTakeFirst();
  const configure = inFile ? inFile.configure : stored && JSON.parse(stored.configure);
  return cronCount(configure) - Number(held?.release_crons ?? 0);
}
