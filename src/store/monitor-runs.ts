import type { Kysely, Selectable } from "kysely";
import { applyOrder, runFilters } from "./monitor-sql.ts";
import type { MonitorTables } from "./monitor-tables.ts";
import { toRun } from "./rows.ts";
import type { Database, RunTable } from "./schema.ts";
import type {
  Dialect,
  RunPage,
  RunQuery,
  RunRecord,
  RunStatus,
  Scope,
  StatusCounts,
} from "./types.ts";
import { FINISHED } from "./types.ts";

/**
 * POST /monitor/runs (docs/monitoring.md): one element's runs, a page of them and the five status
 * counts, over Kysely for both dialects.
 */

/** Everything but the bulky result, error, stdout, stderr and detail. */
const RUN_COLUMNS = [
  "id",
  "app",
  "space",
  "element_id",
  "element_type",
  "element_name",
  "folder_id",
  "version",
  "trigger_type",
  "status",
  "run_name",
  "run_param",
  "initiator",
  "parent_run_id",
  "in_process",
  "node_id",
  "create_time",
  "start_time",
  "end_time",
  "duration",
  "summary",
  "rerun_of",
  "rerun_kind",
  "run_limit",
] as const;

type RunRow = Pick<Selectable<RunTable>, (typeof RUN_COLUMNS)[number]>;
/** The shared row mapping (rows.ts), for a row read without its bulky columns. */
function toRecord(row: RunRow): RunRecord {
  const { result, error, stdout, stderr, detail, webhooks, ...record } = toRun({
    ...row,
    result: null,
    error: null,
    stdout: null,
    stderr: null,
    detail: null,
    webhooks: null,
  });
  return record;
}

/** The runs of these ids, read without their bulky columns, by id. */
export async function runsByIds(
  db: Kysely<Database>,
  ids: readonly string[],
): Promise<Map<string, RunRecord>> {
  if (ids.length === 0) return new Map();
  const rows = await db.selectFrom("runs").select(RUN_COLUMNS).where("id", "in", ids).execute();
  return new Map(rows.map((r) => [r.id, toRecord(r)]));
}

/** One page of the element's runs with the five counts. */
export async function monitorRuns(
  db: Kysely<Database>,
  dialect: Dialect,
  textIndexMinRuns: number,
  scope: Scope,
  elementId: string,
  q: RunQuery,
): Promise<RunPage> {
  // Text searches (quickSearch, contains/prefix) read every run of the element whatever the
  // indexes: do it once, keeping only what counts and paging need, instead of twice.
  if (q.quickSearch !== null || q.colFilters.some((f) => f.kind !== "interval" && f.op !== "eq")) {
    const textIndex =
      dialect === "postgres" && (await elementRuns(db, scope, elementId)) >= textIndexMinRuns;
    return searchedPage(db, dialect, scope, elementId, q, textIndex);
  }
  return indexedPage(db, dialect, scope, elementId, q);
}

const ofElement = (db: Kysely<Database>, scope: Scope, elementId: string) =>
  db
    .selectFrom("runs")
    .where("app", "=", scope.app)
    .where("space", "=", scope.space)
    .where("element_id", "=", Number(elementId));

/** A text search: every match's id and status in one read, counted and paged here. */
async function searchedPage(
  db: Kysely<Database>,
  dialect: Dialect,
  scope: Scope,
  elementId: string,
  q: RunQuery,
  textIndex: boolean,
): Promise<RunPage> {
  const matches = await applyOrder(
    ofElement(db, scope, elementId)
      .select(["id", "status"])
      .where((eb) => runFilters(eb, dialect, q, false, textIndex)),
    q.orderBy,
    dialect,
  ).execute();
  const counts: StatusCounts = { QUEUED: 0, STARTED: 0, SUCCESS: 0, FAILURE: 0, CANCELED: 0 };
  for (const m of matches) if (m.status in counts) counts[m.status as RunStatus]++;
  const wanted = new Set<string>(q.statuses ?? Object.keys(counts));
  const kept = matches.filter((m) => wanted.has(m.status));
  const ids = kept.slice(q.offset, q.offset + q.limit).map((m) => m.id);
  const byId = await runsByIds(db, ids);
  return { counts, totalCount: kept.length, runs: ids.flatMap((id) => byId.get(id) ?? []) };
}

/** Any other query: the counts first, then only the page's ids from an index. */
async function indexedPage(
  db: Kysely<Database>,
  dialect: Dialect,
  scope: Scope,
  elementId: string,
  q: RunQuery,
): Promise<RunPage> {
  const counts: StatusCounts = { QUEUED: 0, STARTED: 0, SUCCESS: 0, FAILURE: 0, CANCELED: 0 };
  for (const g of await statusCounts(db, dialect, scope, elementId, q))
    if (g.status in counts) counts[g.status as RunStatus] = Number(g.n);
  const wanted = q.statuses ?? (Object.keys(counts) as RunStatus[]);
  const totalCount = wanted.reduce((sum, s) => sum + counts[s], 0);
  if (q.offset >= totalCount) return { counts, totalCount, runs: [] };

  // Late row lookup: the page's ids come from an index scan (skipping OFFSET entries without
  // touching the table where the filters allow), then only those rows are read. Past the
  // middle the index is read from the other end (every order is total, totalCount exact),
  // so a deep page skips at most half the matches.
  const fromEnd = q.offset > totalCount / 2;
  const skip = fromEnd ? Math.max(0, totalCount - q.offset - q.limit) : q.offset;
  const take = fromEnd ? Math.min(q.limit, totalCount - q.offset) : q.limit;
  const order = fromEnd ? q.orderBy.map((k) => ({ ...k, asc: !k.asc })) : q.orderBy;
  const page = await applyOrder(
    ofElement(db, scope, elementId)
      .select("id")
      .where((eb) => runFilters(eb, dialect, q, true)),
    order,
    dialect,
  )
    .limit(take)
    .offset(skip)
    .execute();
  if (fromEnd) page.reverse();
  const byId = await runsByIds(
    db,
    page.map((p) => p.id),
  );
  const runs = page.flatMap((p) => byId.get(p.id) ?? []);
  return { counts, totalCount, runs };
}

/**
 * The five counts (status filter left out). Status and trigger filters alone read the counters
 * of migration 006 for finished runs (a few rows whatever the run count) and count the
 * unfinished ones, few, from runs_mon_status; any other filter counts the matching runs in one
 * grouped pass.
 */
async function statusCounts(
  db: Kysely<Database>,
  dialect: Dialect,
  scope: Scope,
  elementId: string,
  q: RunQuery,
): Promise<{ status: string; n: number | string | bigint }[]> {
  const runs = () =>
    db
      .selectFrom("runs")
      .select((eb) => ["status", eb.fn.countAll<number>().as("n")])
      .where("app", "=", scope.app)
      .where("space", "=", scope.space)
      .where("element_id", "=", Number(elementId));
  if (q.versions !== null || q.colFilters.length > 0 || q.quickSearch !== null) {
    return runs()
      .where((eb) => runFilters(eb, dialect, q, false))
      .groupBy("status")
      .execute();
  }
  // One statement, one round trip: the counters' rows and the unfinished runs' index entries.
  return finishedCounts(db, scope, elementId)
    .select((eb) => ["status", eb.fn.sum<number>("n").as("n")])
    .$if(q.triggers !== null, (qb) => qb.where("trigger_type", "in", q.triggers ?? []))
    .groupBy("status")
    .unionAll(
      db
        .withTables<MonitorTables>()
        .selectFrom("runs")
        .select((eb) => ["status", eb.fn.countAll<number>().as("n")])
        .where("app", "=", scope.app)
        .where("space", "=", scope.space)
        .where("element_id", "=", Number(elementId))
        .where("status", "in", ["QUEUED", "STARTED"])
        .$if(q.triggers !== null, (qb) => qb.where("trigger_type", "in", q.triggers ?? []))
        .groupBy("status"),
    )
    .execute();
}

const finishedCounts = (db: Kysely<Database>, scope: Scope, elementId: string) =>
  db
    .withTables<MonitorTables>()
    .selectFrom("run_status_counts")
    .where("app", "=", scope.app)
    .where("space", "=", scope.space)
    .where("element_id", "=", Number(elementId))
    .where("status", "in", FINISHED);

/** How many finished runs the element has, from the counters (a few rows). */
async function elementRuns(db: Kysely<Database>, scope: Scope, elementId: string): Promise<number> {
  const row = await finishedCounts(db, scope, elementId)
    .select((eb) => eb.fn.sum<number>("n").as("n"))
    .executeTakeFirst();
  return Number(row?.n ?? 0);
}
