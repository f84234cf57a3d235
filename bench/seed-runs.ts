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
import { openStore } from "../src/store/open-store.ts";
import type { Scope } from "../src/store/types.ts";

export interface SeedOptions {
  dataDir: string;
  runs: number;
  flows: number;
  spaces: number;
  /** Called after each committed batch with the number of runs written so far. */
  onCommit?: (written: number, db: DatabaseSync) => void;
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

export async function seedRuns(opts: SeedOptions): Promise<SeededFlow[]> {
  const store = await openStore({ dataDir: opts.dataDir });
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

  const db = new DatabaseSync(path.join(opts.dataDir, "sluice.db"));
  db.exec("PRAGMA journal_mode = WAL; PRAGMA synchronous = OFF; PRAGMA cache_size = -262144;");
  const rowSql = `(${COLUMNS.map(() => "?").join(",")})`;
  const insert = db.prepare(
    `INSERT INTO runs (${COLUMNS.join(",")}) VALUES ${Array(ROWS_PER_INSERT).fill(rowSql).join(",")}`,
  );

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
  // Indexes are dropped after the first 100,000 runs (so that size is measured with them) and
  // rebuilt at the end: one sort per index instead of a million scattered B-tree inserts.
  const indexSql = db
    .prepare(
      "SELECT name, sql FROM sqlite_master WHERE type = 'index' AND tbl_name = 'runs' AND sql IS NOT NULL",
    )
    .all() as { name: string; sql: string }[];
  let indexesDropped = false;
  let t = T0;
  let written = 0;
  const params: SQLInputValue[] = [];
  db.exec("BEGIN");
  while (written < opts.runs) {
    params.length = 0;
    for (let i = 0; i < ROWS_PER_INSERT; i++) {
      t += 1 + Math.floor(rand() * 5); // ~3 ms apart: 1M runs span ~50 min of create times
      const f = pickFlow(rand());
      const status = pickWeighted(STATUS, rand());
      const trigger = pickWeighted(TRIGGER, rand());
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
    insert.run(...params);
    written += ROWS_PER_INSERT;
    if (written % ROWS_PER_TX === 0 || written >= opts.runs) {
      db.exec("COMMIT");
      opts.onCommit?.(written, db);
      if (written >= 100_000 && !indexesDropped && written < opts.runs) {
        for (const ix of indexSql) db.exec(`DROP INDEX "${ix.name}"`);
        indexesDropped = true;
      }
      db.exec("BEGIN");
    }
  }
  db.exec("COMMIT");
  if (indexesDropped) for (const ix of indexSql) db.exec(ix.sql);
  // What insertRun's counter would hold after inserting these runs one by one.
  db.exec(
    "DELETE FROM element_run_stats; INSERT INTO element_run_stats (element_id, total_runs) SELECT element_id, count(*) FROM runs GROUP BY element_id;",
  );
  db.exec("ANALYZE; PRAGMA wal_checkpoint(TRUNCATE);");
  db.close();
  return flows;
}

/** Bytes of the database file plus its WAL, after a checkpoint. */
export function dbBytes(dataDir: string, db?: DatabaseSync): number {
  db?.exec("PRAGMA wal_checkpoint(TRUNCATE);");
  const size = (f: string) => (fs.existsSync(f) ? fs.statSync(f).size : 0);
  const file = path.join(dataDir, "sluice.db");
  return size(file) + size(`${file}-wal`);
}
