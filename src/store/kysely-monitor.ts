import { type Kysely, type Selectable, sql, type Transaction } from "kysely";
import { applyOrder, runFilters } from "./monitor-sql.ts";
import { ELEMENT_COLUMNS, toElement, toRun } from "./rows.ts";
import type { Database, RunTable } from "./schema.ts";
import type {
  Dialect,
  FlowListRow,
  FlowOverviewRow,
  RunPage,
  RunQuery,
  RunRecord,
  RunStatus,
  Scope,
  ScopeFilter,
  StatusCounts,
  Store,
} from "./types.ts";
import { FINISHED } from "./types.ts";

/**
 * From this many runs of one element on, PostgreSQL text searches go through the trigram index
 * (migration 007). Below it, reading the element's rows is cheaper than the index whenever the
 * text is common across other elements (e.g. `backfill-1`: tens of thousands of rows table-wide).
 */
const TEXT_INDEX_MIN_RUNS = 20_000;

type MonitorMethods = Pick<Store, "monitorRuns" | "monitorFlows" | "listFlows">;

/** The counter table of migration 002; known to this file only. */
type MonitorTables = {
  element_run_stats: { element_id: number; total_runs: number };
  /** Migration 006: finished runs only, kept exact by countFinished. */
  run_status_counts: {
    app: string;
    space: string;
    element_id: number;
    trigger_type: string;
    status: string;
    n: number;
  };
};

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
] as const;

type RunRow = Pick<Selectable<RunTable>, (typeof RUN_COLUMNS)[number]>;
/** The shared row mapping (rows.ts), for a row read without its bulky columns. */
function toRecord(row: RunRow): RunRecord {
  const { result, error, stdout, stderr, detail, ...record } = toRun({
    ...row,
    result: null,
    error: null,
    stdout: null,
    stderr: null,
    detail: null,
  });
  return record;
}

/**
 * Counts a new run for its element's `totalRuns`. Called inside insertRun's transaction: one
 * upsert on a one-row-per-element table, so the overview never counts runs.
 */
export async function countRun(
  tx: Transaction<Database>,
  elementId: string,
  runs = 1,
): Promise<void> {
  await tx
    .withTables<MonitorTables>()
    .insertInto("element_run_stats")
    .values({ element_id: Number(elementId), total_runs: runs })
    .onConflict((oc) =>
      oc
        .column("element_id")
        .doUpdateSet({ total_runs: sql`element_run_stats.total_runs + ${runs}` }),
    )
    .execute();
}

/** What identifies a run's counter in run_status_counts. */
export interface CounterKey {
  app: string;
  space: string;
  element_id: number;
  trigger_type: string;
  status: string;
}

/**
 * Adds `delta` to the counters of finished runs (migration 006) for each key, in the caller's
 * transaction with the runs' own write. PostgreSQL's upsert holds the counter row until commit,
 * so concurrent writers queue on it and the count stays exact; keys go in one order so that two
 * transactions never wait on each other's rows crosswise.
 */
export async function countFinished(
  tx: Transaction<Database>,
  keys: readonly CounterKey[],
  delta: 1 | -1,
): Promise<void> {
  const grouped = new Map<string, CounterKey & { n: number }>();
  for (const k of keys) {
    if (!(FINISHED as readonly string[]).includes(k.status)) continue;
    const id = JSON.stringify([k.app, k.space, k.element_id, k.trigger_type, k.status]);
    const g = grouped.get(id) ?? { ...k, n: 0 };
    g.n += delta;
    grouped.set(id, g);
  }
  for (const [, g] of [...grouped].sort(([a], [b]) => (a < b ? -1 : 1))) {
    await tx
      .withTables<MonitorTables>()
      .insertInto("run_status_counts")
      .values({
        app: g.app,
        space: g.space,
        element_id: Number(g.element_id),
        trigger_type: g.trigger_type,
        status: g.status,
        n: g.n,
      })
      .onConflict((oc) =>
        oc
          .columns(["app", "space", "element_id", "trigger_type", "status"])
          .doUpdateSet({ n: sql`run_status_counts.n + ${g.n}` }),
      )
      .execute();
  }
}

/** Monitoring reads (docs/monitoring.md) over Kysely for both dialects. */
export function monitorMethods(
  db: Kysely<Database>,
  dialect: Dialect,
  textIndexMinRuns = TEXT_INDEX_MIN_RUNS,
): MonitorMethods {
  const mdb = db.withTables<MonitorTables>();

  async function runsByIds(ids: readonly string[]): Promise<Map<string, RunRecord>> {
    if (ids.length === 0) return new Map();
    const rows = await db.selectFrom("runs").select(RUN_COLUMNS).where("id", "in", ids).execute();
    return new Map(rows.map((r) => [r.id, toRecord(r)]));
  }

  /**
   * The five counts (status filter left out). Status and trigger filters alone read the counters
   * of migration 006 for finished runs (a few rows whatever the run count) and count the
   * unfinished ones, few, from runs_mon_status; any other filter counts the matching runs in one
   * grouped pass.
   */
  async function statusCounts(
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
    return finishedCounts(scope, elementId)
      .select((eb) => ["status", eb.fn.sum<number>("n").as("n")])
      .$if(q.triggers !== null, (qb) => qb.where("trigger_type", "in", q.triggers ?? []))
      .groupBy("status")
      .unionAll(
        mdb
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

  const finishedCounts = (scope: Scope, elementId: string) =>
    mdb
      .selectFrom("run_status_counts")
      .where("app", "=", scope.app)
      .where("space", "=", scope.space)
      .where("element_id", "=", Number(elementId))
      .where("status", "in", FINISHED);

  /** How many finished runs the element has, from the counters (a few rows). */
  async function elementRuns(scope: Scope, elementId: string): Promise<number> {
    const row = await finishedCounts(scope, elementId)
      .select((eb) => eb.fn.sum<number>("n").as("n"))
      .executeTakeFirst();
    return Number(row?.n ?? 0);
  }

  return {
    async monitorRuns(scope: Scope, elementId: string, q: RunQuery): Promise<RunPage> {
      const ofElement = () =>
        db
          .selectFrom("runs")
          .where("app", "=", scope.app)
          .where("space", "=", scope.space)
          .where("element_id", "=", Number(elementId));

      // Text searches (quickSearch, contains/prefix) read every run of the element whatever the
      // indexes: do it once, keeping only what counts and paging need, instead of twice.
      if (
        q.quickSearch !== null ||
        q.colFilters.some((f) => f.kind !== "interval" && f.op !== "eq")
      ) {
        const textIndex =
          dialect === "postgres" && (await elementRuns(scope, elementId)) >= textIndexMinRuns;
        const matches = await applyOrder(
          ofElement()
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
        const byId = await runsByIds(ids);
        return { counts, totalCount: kept.length, runs: ids.flatMap((id) => byId.get(id) ?? []) };
      }

      const counts: StatusCounts = { QUEUED: 0, STARTED: 0, SUCCESS: 0, FAILURE: 0, CANCELED: 0 };
      for (const g of await statusCounts(scope, elementId, q))
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
        ofElement()
          .select("id")
          .where((eb) => runFilters(eb, dialect, q, true)),
        order,
        dialect,
      )
        .limit(take)
        .offset(skip)
        .execute();
      if (fromEnd) page.reverse();
      const byId = await runsByIds(page.map((p) => p.id));
      const runs = page.flatMap((p) => byId.get(p.id) ?? []);
      return { counts, totalCount, runs };
    },

    async monitorFlows(scope: Scope): Promise<FlowOverviewRow[]> {
      const rows = await mdb
        .selectFrom("elements as e")
        .innerJoin("folders as f", "f.id", "e.folder_id")
        .leftJoin("flow_revisions as r", (j) =>
          j.onRef("r.element_id", "=", "e.id").onRef("r.version", "=", "e.release_version"),
        )
        .leftJoin("element_run_stats as s", "s.element_id", "e.id")
        .select(ELEMENT_COLUMNS)
        .select(["r.name as revision_name", "s.total_runs"])
        // Newest run per element: one index probe each (runs_mon_created, read backwards).
        .select((eb) =>
          eb
            .selectFrom("runs as lr")
            .select("lr.id")
            .where("lr.app", "=", scope.app)
            .where("lr.space", "=", scope.space)
            .whereRef("lr.element_id", "=", "e.id")
            .orderBy("lr.create_time", "desc")
            .orderBy("lr.id", "desc")
            .limit(1)
            .as("last_run_id"),
        )
        .where("e.app", "=", scope.app)
        .where("e.space", "=", scope.space)
        .where("e.type", "=", "DPL")
        .orderBy("f.path")
        .orderBy("e.name")
        .execute();
      const last = await runsByIds(rows.flatMap((r) => (r.last_run_id ? [r.last_run_id] : [])));
      return rows.map((r) => ({
        element: toElement(r),
        revisionName: r.revision_name ?? null,
        totalRuns: Number(r.total_runs ?? 0),
        lastRun: (r.last_run_id && last.get(r.last_run_id)) || null,
      }));
    },

    async listFlows(scope: ScopeFilter): Promise<FlowListRow[]> {
      const elements = await db
        .selectFrom("elements as e")
        .innerJoin("folders as f", "f.id", "e.folder_id")
        .select(ELEMENT_COLUMNS)
        .where("e.type", "=", "DPL")
        .$if(scope !== null, (qb) =>
          qb.where("e.app", "=", scope?.app ?? "").where("e.space", "=", scope?.space ?? ""),
        )
        .orderBy("e.app")
        .orderBy("e.space")
        .orderBy("f.path")
        .orderBy("e.name")
        .execute();
      // Literal statuses (constants) so that SQLite can prove the partial index runs_unfinished
      // applies; bound parameters would hide that from its planner. Only unfinished runs are read.
      const busy = await db
        .selectFrom("runs")
        .select((eb) => ["element_id", eb.fn.countAll<number>().as("n")])
        .where("status", "in", [sql.lit("QUEUED"), sql.lit("STARTED")])
        .where("in_process", "=", 1)
        .where("element_type", "=", "DPL")
        .$if(scope !== null, (qb) =>
          qb.where("app", "=", scope?.app ?? "").where("space", "=", scope?.space ?? ""),
        )
        .groupBy("element_id")
        .execute();
      const byElement = new Map(busy.map((b) => [String(b.element_id), Number(b.n)]));
      return elements.map((e) => ({
        element: toElement(e),
        inProcessCount: byElement.get(String(e.id)) ?? 0,
      }));
    },
  };
}
