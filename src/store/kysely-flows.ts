import type { Kysely, Transaction } from "kysely";
import { ErrorCode, SluiceError } from "../errors.ts";
import { cronCount } from "../flows/cron-triggers.ts";
import { bounded, checkSchedules, lockApp } from "./app-bounds.ts";
import { elementForDeploy } from "./deploy-element.ts";
import { pruneRevisions, writePins } from "./kysely-keep.ts";
import { toRevisionInfo } from "./kysely-revisions.ts";
import type { FlowRevision, ReleaseChange, ScriptPin } from "./revision-types.ts";
import type { Database } from "./schema.ts";
import type { Dialect, Element, FlowStatus, NewFlowDeploy, Store } from "./types.ts";

type FlowMethods = Pick<
  Store,
  "deployFlow" | "renameRevision" | "setFlowStatus" | "flowRevision" | "changeRelease"
>;

const userId = (user: Record<string, unknown> | null) =>
  typeof user?.userId === "string" ? user.userId : null;

/** A deploy with its defaults applied: released unless asked not to, no script pins. */
type Deploy = NewFlowDeploy & { release: boolean; pins: ScriptPin[] | null };

/** Flow revisions and release state (docs/dataflow-service.md), over Kysely for both dialects. */
export function flowMethods(
  db: Kysely<Database>,
  dialect: Dialect,
  elementById: (id: number) => Promise<Element>,
): FlowMethods {
  return {
    deployFlow: (deploy) => deployFlow(db, dialect, elementById, deploy),
    changeRelease: (c) => changeRelease(db, dialect, c),
    renameRevision: (elementId, name) => renameRevision(db, elementId, name),
    setFlowStatus: (elementId, status, user, now) =>
      setFlowStatus(db, elementId, status, user, now),
    flowRevision: (elementId, version) => flowRevision(db, elementId, version),
  };
}

/**
 * One transaction: the element (found or created), its next revision, the release if any, and
 * the removal of revisions past the bound (docs/dataflow-service.md, "How many revisions are kept").
 * A new element, or a release of an APPROVED flow with more cron triggers, is checked against
 * what the app may hold (docs/security.md, "What an app may hold").
 */
async function deployFlow(
  db: Kysely<Database>,
  dialect: Dialect,
  elementById: (id: number) => Promise<Element>,
  deploy: NewFlowDeploy,
): Promise<{ element: Element; version: number }> {
  const d: Deploy = { ...deploy, release: deploy.release ?? true, pins: deploy.pins ?? null };
  const crons = d.release ? cronCount(d.configure) : 0;
  const { id, version } = await db.transaction().execute(async (tx) => {
    const { elementId, status, before } = await elementForDeploy(tx, dialect, d);
    const next = await insertRevision(tx, elementId, d);
    await updateDeployed(tx, elementId, next, d, crons);
    // More active schedules: the app may not pass its bound (its lock is held: deploy-element.ts).
    if (d.release && status === "APPROVED" && crons > before)
      await checkSchedules(tx, d.scope.app, d.bounds, `the release of flow ${d.name}`);
    if (d.release)
      await recordRelease(tx, {
        elementId: String(elementId),
        action: "DEPLOY",
        status,
        version: next,
        pins: d.pins,
        user: d.user,
        now: d.now,
      });
    const keep = d.keepRevisions ?? 0;
    const pruned = await pruneRevisions(tx, d.scope, elementId, keep);
    // Nothing may go: refused, and the transaction (the new revision with it) rolls back.
    if (pruned.held > keep && pruned.removed === 0)
      throw new SluiceError(ErrorCode.REVISION_LIMIT, [d.name, String(pruned.held - 1)]);
    return { id: elementId, version: next };
  });
  return { element: await elementById(id), version };
}

/** Writes the element's next revision and answers its version. */
async function insertRevision(
  tx: Transaction<Database>,
  elementId: number,
  d: Deploy,
): Promise<number> {
  const last = await tx
    .selectFrom("flow_revisions")
    .select((eb) => eb.fn.max("version").as("v"))
    .where("element_id", "=", elementId)
    .executeTakeFirst();
  const next = Number(last?.v ?? 0) + 1;
  await tx
    .insertInto("flow_revisions")
    .values({
      element_id: elementId,
      version: next,
      name: d.revisionName,
      flow: JSON.stringify(d.flow),
      configure: JSON.stringify(d.configure ?? {}),
      created_at: d.now,
      user_id: userId(d.user),
      released_at: d.release ? d.now : null,
      script_pins: d.release && d.pins ? JSON.stringify(d.pins) : null,
    })
    .execute();
  if (d.release && d.pins) await writePins(tx, elementId, next, d.pins);
  return next;
}

/** The element after a deploy: its release moves to the new revision when the deploy releases. */
async function updateDeployed(
  tx: Transaction<Database>,
  elementId: number,
  next: number,
  d: Deploy,
  crons: number,
): Promise<void> {
  await tx
    .updateTable("elements")
    .set({
      ...(d.release
        ? {
            release_version: next,
            release_crons: crons,
            release_user: d.user ? JSON.stringify(d.user) : null,
            release_time: d.now,
          }
        : {}),
      updated_at: d.now,
      ...(d.description ? { description: JSON.stringify(d.description) } : {}),
    })
    .where("id", "=", elementId)
    .execute();
}

async function changeRelease(
  db: Kysely<Database>,
  dialect: Dialect,
  c: ReleaseChange,
): Promise<boolean> {
  return db.transaction().execute(async (tx) => {
    const id = Number(c.elementId);
    // An activation may make the app's active schedules more: the app's lock first, before any
    // row (docs/security.md, "What an app may hold").
    const checks = c.status === "APPROVED" && bounded(c.bounds?.schedules);
    const app = checks ? await appOf(tx, id) : undefined;
    if (app !== undefined) await lockApp(tx, dialect, app);
    // The element's row first, as a deploy takes it before removing revisions: on PostgreSQL a
    // release change that locked its revision first deadlocked with a deploy removing that
    // revision (docs/dataflow-service.md, "How many revisions are kept"); now it waits for the
    // deploy and finds the revision gone.
    await tx.updateTable("elements").set({ updated_at: c.now }).where("id", "=", id).execute();
    const was = await tx
      .selectFrom("elements")
      .select(["name", "status", "release_crons"])
      .where("id", "=", id)
      .executeTakeFirst();
    let crons = Number(was?.release_crons ?? 0);
    if (c.version !== null) {
      const updated = await tx
        .updateTable("flow_revisions")
        .set({ released_at: c.now, script_pins: c.pins ? JSON.stringify(c.pins) : null })
        .where("element_id", "=", id)
        .where("version", "=", c.version)
        .executeTakeFirst();
      if (Number(updated.numUpdatedRows) === 0) return false;
      await writePins(tx, id, c.version, c.pins);
      crons = await revisionCrons(tx, id, c.version);
    }
    await tx
      .updateTable("elements")
      .set({
        status: c.status,
        ...(c.version !== null ? { release_version: c.version, release_crons: crons } : {}),
        // lastRelease is the last deploy or activate; a deactivation leaves it (docs/monitoring.md).
        ...(c.status === "APPROVED"
          ? { release_user: c.user ? JSON.stringify(c.user) : null, release_time: c.now }
          : {}),
        updated_at: c.now,
      })
      .where("id", "=", id)
      .execute();
    const before = was?.status === "APPROVED" ? Number(was.release_crons) : 0;
    if (app !== undefined && crons > before)
      await checkSchedules(tx, app, c.bounds, `the release of flow ${was?.name ?? id}`);
    // A change that keeps the release (a deactivation) records the release it keeps.
    const kept =
      c.version !== null
        ? c.version
        : ((
            await tx
              .selectFrom("elements")
              .select("release_version")
              .where("id", "=", id)
              .executeTakeFirst()
          )?.release_version ?? null);
    await recordRelease(tx, { ...c, version: kept, pins: c.version !== null ? c.pins : null });
    return true;
  });
}

async function appOf(tx: Transaction<Database>, id: number): Promise<string | undefined> {
  const row = await tx.selectFrom("elements").select("app").where("id", "=", id).executeTakeFirst();
  return row?.app;
}

/** The cron triggers of one revision (the release an activation makes). */
async function revisionCrons(
  tx: Transaction<Database>,
  id: number,
  version: number,
): Promise<number> {
  const row = await tx
    .selectFrom("flow_revisions")
    .select("configure")
    .where("element_id", "=", id)
    .where("version", "=", version)
    .executeTakeFirst();
  return row ? cronCount(JSON.parse(row.configure)) : 0;
}

async function renameRevision(
  db: Kysely<Database>,
  elementId: string,
  name: string,
): Promise<boolean> {
  const last = await db
    .selectFrom("flow_revisions")
    .select((eb) => eb.fn.max("version").as("v"))
    .where("element_id", "=", Number(elementId))
    .executeTakeFirst();
  if (last?.v == null) return false;
  await db
    .updateTable("flow_revisions")
    .set({ name })
    .where("element_id", "=", Number(elementId))
    .where("version", "=", Number(last.v))
    .execute();
  return true;
}

async function setFlowStatus(
  db: Kysely<Database>,
  elementId: string,
  status: FlowStatus,
  user: Record<string, unknown> | null,
  now: number,
): Promise<void> {
  await db
    .updateTable("elements")
    .set({
      status,
      // lastRelease is the last deploy or activate; a deactivation leaves it (docs/monitoring.md).
      ...(status === "APPROVED"
        ? { release_user: user ? JSON.stringify(user) : null, release_time: now }
        : {}),
      updated_at: now,
    })
    .where("id", "=", Number(elementId))
    .execute();
}

async function flowRevision(
  db: Kysely<Database>,
  elementId: string,
  version: number,
): Promise<FlowRevision | undefined> {
  const row = await db
    .selectFrom("flow_revisions")
    .selectAll()
    .where("element_id", "=", Number(elementId))
    .where("version", "=", version)
    .executeTakeFirst();
  if (!row) return undefined;
  return {
    ...toRevisionInfo(row),
    flow: JSON.parse(row.flow),
    configure: JSON.parse(row.configure),
  };
}

async function recordRelease(
  tx: Transaction<Database>,
  c: Omit<ReleaseChange, "user"> & { user: Record<string, unknown> | null },
): Promise<void> {
  await tx
    .insertInto("flow_releases")
    .values({
      element_id: Number(c.elementId),
      version: c.version,
      action: c.action,
      status: c.status,
      user_id: userId(c.user),
      at: c.now,
      script_pins: c.version !== null && c.pins ? JSON.stringify(c.pins) : null,
    })
    .execute();
}
