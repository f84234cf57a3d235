import type { Kysely, SelectQueryBuilder } from "kysely";
import type { Database } from "../store/schema.ts";
import type { AuditEntry, AuditOutcome, AuditStore } from "./types.ts";

/** The table of migration 016, seen only through this file. */
interface AuditRow {
  id: string;
  at: number;
  app: string;
  space: string;
  user_name: string | null;
  address: string | null;
  method: string;
  route: string;
  action: string;
  target: string;
  outcome: string;
  code: number | null;
  http_status: number;
  duration_ms: number;
  request_id: string | null;
}
type AuditTables = { audit_entries: AuditRow };
type Query = SelectQueryBuilder<AuditTables, "audit_entries", object>;

/**
 * The audit store: inserts and reads, and the retention purge. There is deliberately no update
 * and no delete by ID (docs/audit.md, "Listing").
 */
export function createAuditStore(base: Kysely<Database>): AuditStore {
  const db = base.withTables<AuditTables>();
  return {
    async insert(entries) {
      if (entries.length === 0) return;
      await db.insertInto("audit_entries").values(entries.map(toRow)).execute();
    },
    async list(scope, filter, window) {
      let q: Query = db.selectFrom("audit_entries");
      if (scope) q = q.where("app", "=", scope.app).where("space", "=", scope.space);
      if (filter.from !== undefined) q = q.where("at", ">=", filter.from);
      if (filter.to !== undefined) q = q.where("at", "<=", filter.to);
      if (filter.user !== undefined) q = q.where("user_name", "=", filter.user);
      if (filter.action !== undefined) q = q.where("action", "=", filter.action);
      if (filter.outcome !== undefined) q = q.where("outcome", "=", filter.outcome);
      const [count, rows] = await Promise.all([
        q.select((e) => e.fn.countAll<number>().as("n")).executeTakeFirstOrThrow(),
        q
          .selectAll()
          .orderBy("at", "desc")
          .orderBy("id", "desc")
          .limit(window.limit)
          .offset(window.offset)
          .execute(),
      ]);
      return { totalCount: Number(count.n), entries: rows.map(fromRow) };
    },
    async purgeBefore(before, limit) {
      // One bounded statement: the oldest rows first, through the `at` index, never a long lock.
      const res = await db
        .deleteFrom("audit_entries")
        .where(
          "id",
          "in",
          db
            .selectFrom("audit_entries")
            .select("id")
            .where("at", "<", before)
            .orderBy("at")
            .limit(limit),
        )
        .executeTakeFirst();
      return Number(res.numDeletedRows);
    },
  };
}

function toRow(e: AuditEntry): AuditRow {
  return {
    id: e.id,
    at: e.at,
    app: e.app,
    space: e.space,
    user_name: e.user,
    address: e.address,
    method: e.method,
    route: e.route,
    action: e.action,
    target: JSON.stringify(e.target),
    outcome: e.outcome,
    code: e.code,
    http_status: e.httpStatus,
    duration_ms: e.durationMs,
    request_id: e.requestId,
  };
}

function fromRow(r: AuditRow): AuditEntry {
  return {
    id: r.id,
    at: Number(r.at),
    app: r.app,
    space: r.space,
    user: r.user_name,
    address: r.address,
    method: r.method,
    route: r.route,
    action: r.action,
    target: JSON.parse(r.target) as Record<string, unknown>,
    outcome: r.outcome as AuditOutcome,
    code: r.code === null ? null : Number(r.code),
    httpStatus: Number(r.http_status),
    durationMs: Number(r.duration_ms),
    requestId: r.request_id,
  };
}
