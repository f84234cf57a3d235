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
 * The time a beat (and an idempotency key's claim) is written with and judged by (docs/cluster.md, "Clocks"). PostgreSQL's own
 * clock: nodes share it, so a node whose clock is minutes off is neither taken for dead while it
 * beats nor for alive long after it died. SQLite: the caller's clock (injected, so tests move it).
 */
export function databaseNow(dialect: Dialect, now: number): Expression<number> | number {
  return dialect === "postgres"
    ? sql<number>`(extract(epoch from clock_timestamp()) * 1000)::bigint`
    : now;
}

/** The oldest beat of a live node, by the same clock as `beatTime`. */
export function liveSince(dialect: Dialect, live: Liveness): Expression<number> | number {
  return dialect === "postgres"
    ? sql<number>`(extract(epoch from clock_timestamp()) * 1000)::bigint - ${live.timeoutMs}`
    : live.now - live.timeoutMs;
}
