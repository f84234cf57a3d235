import { type Kysely, sql, type Transaction } from "kysely";
import { ErrorCode, SluiceError } from "../errors.ts";
import type { AppBounds } from "./model.ts";
import type { Database } from "./schema.ts";
import type { Dialect } from "./types.ts";

/**
 * What one app may hold (docs/security.md, "What an app may hold"): its elements
 * (LIMIT_ELEMENTS_PER_APP) and its active schedules (LIMIT_SCHEDULES_PER_APP), checked inside the
 * transaction of the write that would pass them. The count is exact under concurrency: on
 * PostgreSQL every such write takes the app's advisory lock first, before any row it writes, so
 * the writes of one app that may pass a bound follow one another and each counts what the
 * earlier ones committed (read committed: each statement sees every commit before it). SQLite has
 * one writer, and the transaction holds it.
 */

type Tx = Transaction<Database>;
/** The counts are read in the writing transaction, or (a dry run) outside any. */
type Db = Kysely<Database>;

/** Whether a bound is set (0: no bound). */
export const bounded = (n: number | undefined): n is number => n !== undefined && n > 0;

/**
 * The app's lock for the rest of the transaction (PostgreSQL). Taken before the transaction
 * writes anything: a transaction holding a row another waits for must not then wait for the lock.
 */
export async function lockApp(tx: Tx, dialect: Dialect, app: string): Promise<void> {
  if (dialect === "postgres")
    await sql`SELECT pg_advisory_xact_lock(hashtext('sluice-app-bounds'), hashtext(${app}))`.execute(
      tx,
    );
}

/** The app's elements, every type and space (the scope's unique index leads with `app`). */
export async function elementCount(tx: Db, app: string): Promise<number> {
  const row = await tx
    .selectFrom("elements")
    .select((eb) => eb.fn.countAll().as("n"))
    .where("app", "=", app)
    .executeTakeFirst();
  return Number(row?.n ?? 0);
}

/** Refuses `adding` new elements (28010006) when the app would then hold more than the bound. */
export async function checkNewElements(
  tx: Db,
  app: string,
  bounds: AppBounds | undefined,
  adding: number,
  what: string,
): Promise<void> {
  if (!bounded(bounds?.elements) || adding <= 0) return;
  const held = await elementCount(tx, app);
  if (held + adding > bounds.elements)
    throw new SluiceError(ErrorCode.ELEMENT_LIMIT, [
      app,
      String(held),
      String(bounds.elements),
      what,
    ]);
}

/** The app's active schedules: the cron triggers of its APPROVED flows' releases. */
export async function activeSchedules(tx: Db, app: string): Promise<number> {
  const row = await tx
    .selectFrom("elements")
    .select((eb) => eb.fn.sum<number | string | null>("release_crons").as("n"))
    .where("app", "=", app)
    .where("type", "=", "DPL")
    .where("status", "=", "APPROVED")
    .executeTakeFirst();
  return Number(row?.n ?? 0);
}

/**
 * After a write that made the app's active schedules more: refused (28010007, the transaction
 * rolls back) when they are now past the bound. A write that adds none is never refused, even
 * with the app over a bound lowered since.
 */
export async function checkSchedules(
  tx: Db,
  app: string,
  bounds: AppBounds | undefined,
  what: string,
): Promise<void> {
  if (!bounded(bounds?.schedules)) return;
  const active = await activeSchedules(tx, app);
  if (active > bounds.schedules) throw scheduleLimit(app, active, bounds.schedules, what);
}

/** 28010007: the app would have `active` schedules, more than `bound`. */
export const scheduleLimit = (app: string, active: number, bound: number, what: string) =>
  new SluiceError(ErrorCode.SCHEDULE_LIMIT, [app, String(active), String(bound), what]);
