import type { Transaction } from "kysely";
import { cronCount } from "../flows/cron-triggers.ts";
import { bounded, checkNewElements, lockApp } from "./app-bounds.ts";
import type { Database } from "./schema.ts";
import type { Dialect, FlowStatus, NewFlowDeploy } from "./types.ts";

type Tx = Transaction<Database>;

/** The element a deploy writes: its id, its status, and the active schedules it had before. */
export interface DeployElement {
  elementId: number;
  status: FlowStatus;
  /** The cron triggers of its release if it was APPROVED, else 0. */
  before: number;
}

async function find(tx: Tx, d: NewFlowDeploy) {
  return tx
    .selectFrom("elements")
    .select(["id", "status", "release_crons"])
    .where("app", "=", d.scope.app)
    .where("space", "=", d.scope.space)
    .where("folder_id", "=", d.folderId)
    .where("type", "=", "DPL")
    .where("name", "=", d.name)
    .executeTakeFirst();
}

/**
 * The element a deploy writes a revision of: found by folder and name, or created DRAFT. A deploy
 * that may pass what the app may hold (a new element; a release with cron triggers) takes the
 * app's lock before it writes anything and looks again (docs/security.md, "What an app may hold"):
 * a deploy of the same new name that committed meanwhile is then found, not created twice.
 */
export async function elementForDeploy(
  tx: Tx,
  dialect: Dialect,
  d: NewFlowDeploy,
): Promise<DeployElement> {
  let existing = await find(tx, d);
  const releasesCrons = (d.release ?? true) && cronCount(d.configure) > 0;
  const mayPass = existing
    ? releasesCrons && bounded(d.bounds?.schedules)
    : bounded(d.bounds?.elements);
  if (mayPass) {
    await lockApp(tx, dialect, d.scope.app);
    existing = await find(tx, d);
  }
  if (existing) {
    const status = (existing.status ?? "DRAFT") as FlowStatus;
    const before = status === "APPROVED" ? Number(existing.release_crons) : 0;
    return { elementId: Number(existing.id), status, before };
  }
  await checkNewElements(tx, d.scope.app, d.bounds, 1, `new flow ${d.name}`);
  const inserted = await tx
    .insertInto("elements")
    .values({
      app: d.scope.app,
      space: d.scope.space,
      folder_id: d.folderId,
      type: "DPL",
      name: d.name,
      description: d.description ? JSON.stringify(d.description) : null,
      status: "DRAFT",
      kind: null,
      content: null,
      release_version: null,
      release_user: null,
      release_time: null,
      created_at: d.now,
      updated_at: d.now,
    })
    .returning("id")
    .executeTakeFirstOrThrow();
  return { elementId: Number(inserted.id), status: "DRAFT", before: 0 };
}
