import {
  type Expression,
  type ExpressionBuilder,
  type RawBuilder,
  type SelectQueryBuilder,
  type SqlBool,
  sql,
} from "kysely";
import type { Database } from "./schema.ts";
import type { ColFilter, Dialect, RunQuery, SortKey, StringOp } from "./types.ts";

/**
 * RunQuery → Kysely expressions over `runs`. Every value from the request becomes a bound
 * parameter; the only text spliced into SQL comes from the constant tables below.
 */

type Runs = ExpressionBuilder<Database, "runs">;

const SORT_COLUMN = {
  runId: "id",
  createTime: "create_time",
  startTime: "start_time",
  endTime: "end_time",
  duration: "duration",
  runName: "run_name",
  triggerType: "trigger_type",
  version: "version",
  initiator: "initiator",
  summary: "summary",
} as const;
/** runStatus sorts in lifecycle order, not alphabetically (docs/monitoring.md). */
const STATUS_RANK = sql<number>`CASE status WHEN 'QUEUED' THEN 0 WHEN 'STARTED' THEN 1 WHEN 'SUCCESS' THEN 2 WHEN 'FAILURE' THEN 3 ELSE 4 END`;
const INTERVAL_COLUMN = {
  startTime: "start_time",
  endTime: "end_time",
  createTime: "create_time",
  duration: "duration",
} as const;
const STRING_COLUMN = {
  runId: "id",
  runName: "run_name",
  version: "version",
  summary: "summary",
  triggerType: "trigger_type",
  runStatus: "status",
} as const;
/** Columns that are NULL until the run starts or ends. */
const NULLABLE: ReadonlySet<string> = new Set([
  "start_time",
  "end_time",
  "duration",
  "run_name",
  "version",
  "initiator",
  "summary",
]);
/** The initiator object's keys that name a person (ReleaseOverview user); searched by value, never as JSON text. */
const INITIATOR_KEYS = ["userId", "userName", "nickName", "email"] as const;

/** Escapes LIKE wildcards so that user text matches literally (used with ESCAPE '\'). */
export function likeEscape(text: string): string {
  return text.replace(/[\\%_]/g, (c) => `\\${c}`);
}

function initiatorField(
  dialect: Dialect,
  key: (typeof INITIATOR_KEYS)[number],
): RawBuilder<string | null> {
  return dialect === "postgres"
    ? sql<string | null>`(${sql.ref("initiator")}::jsonb ->> ${sql.lit(key)})`
    : sql<string | null>`json_extract(${sql.ref("initiator")}, ${sql.lit(`$.${key}`)})`;
}

/**
 * contains/prefix compare case-insensitively; eq is exact. SQLite's LIKE already ignores ASCII
 * case (and its lower() knows no other), so lower() there would only cost a call per row.
 */
function textMatch(
  target: Expression<string | null>,
  op: StringOp,
  value: string,
  dialect: Dialect,
): RawBuilder<SqlBool> {
  if (op === "eq") return sql<SqlBool>`${target} = ${value}`;
  const text = likeEscape(value.toLowerCase());
  const pattern = op === "prefix" ? `${text}%` : `%${text}%`;
  if (dialect === "sqlite") return sql<SqlBool>`${target} like ${pattern} escape '\\'`;
  return sql<SqlBool>`lower(${target}) like ${pattern} escape '\\'`;
}

/** Whether JSON.stringify would escape a character of `text` (quote, backslash, control). */
function needsJsonEscape(text: string): boolean {
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (c < 0x20 || c === 0x22 || c === 0x5c) return true;
  }
  return false;
}

function initiatorMatch(
  eb: Runs,
  dialect: Dialect,
  op: StringOp,
  value: string,
): Expression<SqlBool> {
  const perKey = eb.or(
    INITIATOR_KEYS.map((k) => textMatch(initiatorField(dialect, k), op, value, dialect)),
  );
  // A value found inside a field is also found in the stored JSON text, unless JSON escapes it:
  // that cheap test first spares most rows the JSON parsing, one per key.
  if (op === "eq" || needsJsonEscape(value)) return perKey;
  return eb.and([textMatch(sql.ref("initiator"), "contains", value, dialect), perKey]);
}

function colFilter(eb: Runs, dialect: Dialect, f: ColFilter): Expression<SqlBool> {
  if (f.kind === "interval") {
    const col = INTERVAL_COLUMN[f.column];
    const parts: Expression<SqlBool>[] = [];
    if (f.from !== null) parts.push(eb(col, ">=", f.from));
    if (f.to !== null) parts.push(eb(col, "<=", f.to));
    // An interval without bounds still asks for the value to exist (e.g. only started runs).
    if (parts.length === 0) parts.push(eb(col, "is not", null));
    return eb.and(parts);
  }
  if (f.column === "initiator") return initiatorMatch(eb, dialect, f.op, f.value);
  const col = STRING_COLUMN[f.column];
  if (f.op === "eq") return eb(col, "=", f.value);
  return textMatch(sql.ref(col), f.op, f.value, dialect);
}

const IN_SEARCH_TEXT: ReadonlySet<string> = new Set(["runId", "runName", "summary", "initiator"]);

/** The lower-cased run text of migration 007's trigram index (PostgreSQL); same expression. */
const SEARCH_TEXT = sql<string>`(lower(id || ' ' || coalesce(run_name, '') || ' ' || coalesce(summary, '') || ' ' || coalesce(initiator, '')))`;

/**
 * PostgreSQL: text that every matching run contains somewhere in SEARCH_TEXT, so that testing it
 * first lets the trigram index find the candidates. A value found in one field is found in the
 * joined text; initiator values only when JSON leaves them unescaped. Shorter than a trigram, the
 * index cannot narrow anything, so such text is left to the field tests alone.
 */
function searchNeedles(q: RunQuery): string[] {
  const out: string[] = [];
  if (q.quickSearch !== null && !needsJsonEscape(q.quickSearch)) out.push(q.quickSearch);
  for (const f of q.colFilters) {
    // Only the columns SEARCH_TEXT joins can lend a needle.
    if (f.kind === "interval" || f.op === "eq" || !IN_SEARCH_TEXT.has(f.column)) continue;
    if (f.column === "initiator" && needsJsonEscape(f.value)) continue;
    out.push(f.value);
  }
  return out.filter((n) => n.length >= 3);
}

/**
 * Every filter of the query ANDed together; `withStatus` false leaves out runStatusFilter, which
 * the five status counts ignore (docs/monitoring.md). `textIndex` (PostgreSQL) adds the trigram
 * index's test in front of the text filters. The caller adds scope and element.
 */
export function runFilters(
  eb: Runs,
  dialect: Dialect,
  q: RunQuery,
  withStatus: boolean,
  textIndex = false,
): Expression<SqlBool> {
  const parts: Expression<SqlBool>[] = [];
  if (withStatus && q.statuses) parts.push(eb("status", "in", q.statuses));
  if (q.triggers) parts.push(eb("trigger_type", "in", q.triggers));
  if (q.versions) parts.push(eb("version", "in", q.versions));
  if (q.quickSearch !== null) {
    const s = q.quickSearch;
    parts.push(
      eb.or([
        textMatch(sql.ref("id"), "contains", s, dialect),
        textMatch(sql.ref("run_name"), "contains", s, dialect),
        textMatch(sql.ref("summary"), "contains", s, dialect),
        initiatorMatch(eb, dialect, "contains", s),
      ]),
    );
  }
  for (const f of q.colFilters) parts.push(colFilter(eb, dialect, f));
  if (textIndex && dialect === "postgres") {
    // SEARCH_TEXT is lower-cased already: compared as is, it is the indexed expression. The index
    // holds finished runs only (migration 018): unfinished ones come through the end-time index.
    const needles = searchNeedles(q).map(
      (n) => sql<SqlBool>`${SEARCH_TEXT} like ${`%${likeEscape(n.toLowerCase())}%`} escape '\\'`,
    );
    if (needles.length > 0)
      parts.unshift(
        eb.or([eb("end_time", "is", null), eb.and([eb("end_time", "is not", null), ...needles])]),
      );
  }
  return eb.and(parts);
}

/**
 * ORDER BY for the sort keys. NULL (not started, not ended) sorts as the smallest value in both
 * dialects: SQLite does so natively; PostgreSQL is told so, matching its NULLS FIRST indexes.
 */
export function applyOrder<O>(
  qb: SelectQueryBuilder<Database, "runs", O>,
  keys: readonly SortKey[],
  dialect: Dialect,
): SelectQueryBuilder<Database, "runs", O> {
  let out = qb;
  for (const k of keys) {
    if (k.field === "runStatus") {
      out = out.orderBy(STATUS_RANK, k.asc ? "asc" : "desc");
      continue;
    }
    const col = SORT_COLUMN[k.field];
    if (dialect === "postgres" && NULLABLE.has(col)) {
      out = out.orderBy(col, (ob) => (k.asc ? ob.asc().nullsFirst() : ob.desc().nullsLast()));
    } else {
      out = out.orderBy(col, k.asc ? "asc" : "desc");
    }
  }
  return out;
}
