/**
 * Bulk generator for the monitoring bench: writes runs straight into a Sluice SQLite file with
 * multi-row INSERTs in large transactions (no HTTP, no per-run Store call), then rebuilds the
 * per-element run counters the way insertRun would have left them.
 *
 * Elements and folders are created through the Store (so they are exactly what deploy makes);
 * only the runs, which are the volume, bypass it.
 */
import fs from "node:fs";
import path from "node:path";
import { DatabaseSync, type SQLInputValue } from "node:sqlite";
import pg from "pg";
import { openStore } from "../src/store/open-store.ts";
import type { Scope } from "../src/store/types.ts";

export interface SeedOptions {
  dataDir: string;
  runs: number;
  flows: number;
  spaces: number;
  /** One flow started every 30 s (1,000,000 runs ≈ a year), mostly by its schedule. */
  hot?: boolean;
  /** Seed this PostgreSQL database instead of the SQLite file in dataDir. */
  databaseUrl?: string;
  /** Called after each committed batch with the number of runs written so far (db: SQLite only). */
  onCommit?: (written: number, db?: DatabaseSync) => void;
}

export interface SeededFlow {
  scope: Scope;
  elementId: string;
  name: string;
}

const COLUMNS = [
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
  "in_process",
  "create_time",
  "start_time",
  "end_time",
  "duration",
  "summary",
] as const;
const ROWS_PER_INSERT = 1000; // 19 columns × 1000 = 19,000 parameters (SQLite allows 32,766)
const ROWS_PER_TX = 50_000;
const T0 = Date.UTC(2025, 0, 1);
const B36 = "0123456789abcdefghijklmnopqrstuvwxyz";

/** Small fast PRNG so that a seed gives the same data every time. */
function rng(seed: number): () => number {
  let s = seed >>> 0;
  return () => {
    s = (s + 0x6d2b79f5) >>> 0;
    let t = s;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

function pickWeighted<T>(items: readonly (readonly [T, number])[], r: number): T {
  let acc = 0;
  for (const [v, w] of items) {
    acc += w;
    if (r < acc) return v;
  }
  return (items[items.length - 1] as readonly [T, number])[0];
}

// Finished runs only: the service's restart recovery would requeue QUEUED runs and fail STARTED
// ones when the bench boots it (and more than 10,000 queued runs hit the queue bound at boot).
const STATUS = [
  ["SUCCESS", 0.92],
  ["FAILURE", 0.06],
  ["CANCELED", 0.02],
] as const;
const TRIGGER = [
  ["ASYNC", 0.4],
  ["SYNC", 0.3],
  ["SCHEDULED", 0.25],
  ["API", 0.05],
] as const;
const HOT_TRIGGER = [
  ["SCHEDULED", 0.9],
  ["API", 0.05],
  ["ASYNC", 0.04],
  ["SYNC", 0.01],
] as const;

export async function seedRuns(opts: SeedOptions): Promise<SeededFlow[]> {
  const store = await openStore({ dataDir: opts.dataDir, databaseUrl: opts.databaseUrl });
  const flows: SeededFlow[] = [];
  for (let i = 0; i < opts.flows; i++) {
    const scope = { app: "app1", space: `space${(i % opts.spaces) + 1}` };
    const folder = await store.ensureFolder(scope, `/team${i % 7}`, T0);
    const name = `flow_${String(i).padStart(3, "0")}`;
    const { element } = await store.deployFlow({
      scope,
      folderId: folder.id,
      name,
      revisionName: "r1",
      flow: { vertexes: [], edges: [] },
      configure: {},
      description: { en: `Flow ${i}`, "zh-cn": `流程 ${i}` },
      user: { userId: "seed" },
      now: T0,
    });
    flows.push({ scope, elementId: element.id, name });
  }
  const folders = new Map<string, string>();
  for (const f of flows)
    folders.set(
      f.elementId,
      (await store.findElements(f.scope, { type: "DPL", name: f.name }))[0]?.folderId ?? "",
    );
  await store.close();

  const rows = runRows(opts, flows, folders);
  if (opts.databaseUrl) await writePostgres(opts.databaseUrl, rows, opts);
  else writeSqlite(opts, rows);
  return flows;
}

/** Batches of ROWS_PER_INSERT runs, as flat parameter lists in COLUMNS order. */
function* runRows(
  opts: SeedOptions,
  flows: SeededFlow[],
  folders: Map<string, string>,
): Generator<SQLInputValue[]> {
  // Skewed like real use: flow k gets weight 1/sqrt(k+1), so the busiest has ~10× the median.
  const weights = flows.map((_, k) => 1 / Math.sqrt(k + 1));
  const total = weights.reduce((a, b) => a + b, 0);
  const cumulative: number[] = [];
  let acc = 0;
  for (const w of weights) {
    acc += w;
    cumulative.push(acc / total);
  }
  const pickFlow = (r: number) => {
    let lo = 0;
    let hi = cumulative.length - 1;
    while (lo < hi) {
      const mid = (lo + hi) >> 1;
      if ((cumulative[mid] as number) < r) lo = mid + 1;
      else hi = mid;
    }
    return flows[lo] as SeededFlow;
  };
  const rand = rng(42);
  let t = T0;
  for (let written = 0; written < opts.runs; written += ROWS_PER_INSERT) {
    const params: SQLInputValue[] = [];
    for (let i = 0; i < ROWS_PER_INSERT; i++) {
      // Hot: every 30 s (a year per 1,051,200 runs); else ~3 ms apart, 1M runs in ~50 min.
      t += opts.hot ? 30_000 : 1 + Math.floor(rand() * 5);
      const f = pickFlow(rand());
      const status = pickWeighted(STATUS, rand());
      const trigger = pickWeighted(opts.hot ? HOT_TRIGGER : TRIGGER, rand());
      // Half the canceled runs were canceled while still queued: no start time.
      const started = !(status === "CANCELED" && rand() < 0.5);
      const start = started ? t + Math.floor(rand() * 500) : null;
      const dur = Math.floor(Math.exp(rand() * 11)); // 1 ms .. 60 s, log-uniform
      const end = (start ?? t) + dur;
      let tail = "";
      for (let k = 0; k < 8; k++) tail += B36[Math.floor(rand() * 36)];
      const id = `${t.toString(36).padStart(9, "0")}000${tail}`;
      const user = `user${Math.floor(rand() * 50)}`;
      const tag = ["nightly", "hourly", "adhoc", "backfill"][Math.floor(rand() * 4)];
      const summary =
        status === "SUCCESS"
          ? `3 nodes, ${Math.floor(rand() * 5000)} B result`
          : status === "FAILURE"
            ? `node py failed: ValueError: bad row ${Math.floor(rand() * 1000)}`
            : null;
      params.push(
        id,
        f.scope.app,
        f.scope.space,
        Number(f.elementId),
        "DPL",
        f.name,
        folders.get(f.elementId) ?? "",
        String(1 + Math.floor(rand() * 5)),
        trigger,
        status,
        `${f.name}-${tag}-${written + i}`,
        `{"orders":[{"amount":${Math.floor(rand() * 100)},"qty":2}],"tag":"${tag}"}`,
        `{"userId":"${user}"}`,
        trigger === "SYNC" ? 1 : 0,
        t,
        start,
        end,
        dur,
        summary,
      );
    }
    yield params;
  }
}

function writeSqlite(opts: SeedOptions, batches: Iterable<SQLInputValue[]>): void {
  const db = new DatabaseSync(path.join(opts.dataDir, "sluice.db"));
  db.exec("PRAGMA journal_mode = WAL; PRAGMA synchronous = OFF; PRAGMA cache_size = -262144;");
  const rowSql = `(${COLUMNS.map(() => "?").join(",")})`;
  const insert = db.prepare(
    `INSERT INTO runs (${COLUMNS.join(",")}) VALUES ${Array(ROWS_PER_INSERT).fill(rowSql).join(",")}`,
  );
  // Indexes are dropped after the first 100,000 runs (so that size is measured with them) and
  // rebuilt at the end: one sort per index instead of a million scattered B-tree inserts. Any
  // trigger on runs goes with them; the counters are rebuilt from the rows at the end.
  const objects = db
    .prepare(
      "SELECT type, name, sql FROM sqlite_master WHERE type IN ('index', 'trigger') AND tbl_name = 'runs' AND sql IS NOT NULL",
    )
    .all() as { type: string; name: string; sql: string }[];
  let dropped = false;
  let written = 0;
  db.exec("BEGIN");
  for (const params of batches) {
    insert.run(...params);
    written += ROWS_PER_INSERT;
    if (written % ROWS_PER_TX === 0 || written >= opts.runs) {
      db.exec("COMMIT");
      opts.onCommit?.(written, db);
      if (written >= 100_000 && !dropped && written < opts.runs) {
        for (const o of objects) db.exec(`DROP ${o.type.toUpperCase()} "${o.name}"`);
        dropped = true;
      }
      db.exec("BEGIN");
    }
  }
  db.exec("COMMIT");
  if (dropped) {
    for (const o of objects) db.exec(o.sql);
    db.exec(RECOUNT);
  }
  db.exec(
    "DELETE FROM element_run_stats; INSERT INTO element_run_stats (element_id, total_runs) SELECT element_id, count(*) FROM runs GROUP BY element_id;",
  );
  db.exec("ANALYZE; PRAGMA wal_checkpoint(TRUNCATE);");
  db.close();
}

/** What the Store's counters (migration 006) would hold after inserting the runs one by one. */
const RECOUNT = `DELETE FROM run_status_counts;
  INSERT INTO run_status_counts (app, space, element_id, trigger_type, status, n)
  SELECT app, space, element_id, trigger_type, status, count(*) FROM runs
  WHERE status IN ('SUCCESS', 'FAILURE', 'CANCELED') GROUP BY app, space, element_id, trigger_type, status;`;

/** PostgreSQL: the same batches, with the secondary indexes (and any trigger) off during the load. */
async function writePostgres(
  url: string,
  batches: Iterable<SQLInputValue[]>,
  opts: SeedOptions,
): Promise<void> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  const { rows: indexes } = await client.query<{ indexname: string; indexdef: string }>(
    "SELECT indexname, indexdef FROM pg_indexes WHERE tablename = 'runs' AND indexname <> 'runs_pkey'",
  );
  for (const ix of indexes) await client.query(`DROP INDEX "${ix.indexname}"`);
  await client.query("ALTER TABLE runs DISABLE TRIGGER USER");
  const rowSql = (r: number) =>
    `(${COLUMNS.map((_, c) => `$${r * COLUMNS.length + c + 1}`).join(",")})`;
  const insert = `INSERT INTO runs (${COLUMNS.join(",")}) VALUES ${Array.from({ length: ROWS_PER_INSERT }, (_, r) => rowSql(r)).join(",")}`;
  let written = 0;
  await client.query("BEGIN");
  for (const params of batches) {
    await client.query(insert, params as unknown[]);
    written += ROWS_PER_INSERT;
    if (written % ROWS_PER_TX === 0) {
      await client.query("COMMIT");
      opts.onCommit?.(written);
      await client.query("BEGIN");
    }
  }
  await client.query("COMMIT");
  await client.query("ALTER TABLE runs ENABLE TRIGGER USER");
  await client.query("SET maintenance_work_mem = '256MB'");
  for (const ix of indexes) await client.query(ix.indexdef);
  await client.query(RECOUNT);
  await client.query(
    "DELETE FROM element_run_stats; INSERT INTO element_run_stats (element_id, total_runs) SELECT element_id, count(*) FROM runs GROUP BY element_id",
  );
  await client.query("VACUUM ANALYZE");
  await client.end();
}

/** Bytes of the database file plus its WAL, after a checkpoint. */
export function dbBytes(dataDir: string, db?: DatabaseSync): number {
  db?.exec("PRAGMA wal_checkpoint(TRUNCATE);");
  const size = (f: string) => (fs.existsSync(f) ? fs.statSync(f).size : 0);
  const file = path.join(dataDir, "sluice.db");
  return size(file) + size(`${file}-wal`);
}
