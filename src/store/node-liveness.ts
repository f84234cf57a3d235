import { type Expression, sql } from "kysely";
import type { Dialect } from "./model.ts";

/**
 * Whether a node is alive: its last beat is within `timeoutMs` of `now`. `now` is the caller's
 * clock, used only where the database has no clock of its own to offer (SQLite: one process owns
 * the file, so its clock is the only one).
 */
export interface Liveness {
  now: number;
  timeoutMs: number;
}

/**
 * PostgreSQL's time, in epoch ms: `statement_timestamp()`, the start of the statement. Not
 * `clock_timestamp()`: that one is volatile, and a volatile value compared with an indexed column
 * keeps the planner from the index (the prune of idempotency keys would scan them all).
 */
const PG_NOW = sql<number>`(extract(epoch from statement_timestamp()) * 1000)::bigint`;

/**
 * The time a beat, an idempotency key's claim and its window are written with and judged by
 * (docs/cluster.md, "Clocks"). PostgreSQL's own clock: nodes share it, so a node whose clock is
 * minutes off is neither taken for dead while it beats nor for alive long after it died, nor
 * makes a key look older or younger than it is. SQLite: the caller's clock (injected, so tests
 * move it).
 */
export function databaseNow(dialect: Dialect, now: number): Expression<number> | number {
  return databaseLater(dialect, now, 0);
}

/** `ms` after `databaseNow` (before it, when negative). */
export function databaseLater(
  dialect: Dialect,
  now: number,
  ms: number,
): Expression<number> | number {
  if (dialect !== "postgres") return now + ms;
  return ms === 0 ? PG_NOW : sql<number>`${PG_NOW} + ${ms}::bigint`;
}

/** The oldest beat of a live node, by the same clock as `databaseNow`. */
export function liveSince(dialect: Dialect, live: Liveness): Expression<number> | number {
  return databaseLater(dialect, live.now, -live.timeoutMs);
}
