/**
 * Monitoring at scale: seeds N runs (default 1,000,000) over 200 flows in 2 spaces straight into
 * SQLite (bench/seed-runs.ts), then starts the real service on 127.0.0.1 and times, over HTTP,
 * POST /monitor/runs with typical filter mixes and deep pages, GET /monitor/flows and
 * GET /monitor/run. Prints p50/p95/p99 per mix and the database size at 100,000 runs and at the end.
 *
 *   node bench/monitor-scale.ts                   # 1,000,000 runs, 200 requests per mix
 *   node bench/monitor-scale.ts --runs 200000 --requests 100
 *   node bench/monitor-scale.ts --explain         # also print SQLite query plans
 *   node bench/monitor-scale.ts --keep DIR        # seed into DIR once, reuse it on later runs
 *   node bench/monitor-scale.ts --hot             # one flow with 1,051,000 runs (every 30 s, a year)
 *   node bench/monitor-scale.ts --postgres        # the same against a throwaway PostgreSQL
 *                                                 # (seeded every time; --keep does not apply)
 */
import fs from "node:fs";
import type { AddressInfo } from "node:net";
import os from "node:os";
import path from "node:path";
import { DatabaseSync } from "node:sqlite";
import { parseArgs } from "node:util";
import pg from "pg";
import pino from "pino";
import { buildApp } from "../src/app.ts";
import { loadConfig } from "../src/config.ts";
import { createServices } from "../src/services.ts";
import { startPostgres } from "../test/helpers/pg.ts";
import { dbBytes, type SeededFlow, seedRuns } from "./seed-runs.ts";

const { values } = parseArgs({
  options: {
    runs: { type: "string", default: "1000000" },
    flows: { type: "string", default: "200" },
    requests: { type: "string", default: "200" },
    explain: { type: "boolean", default: false },
    keep: { type: "string" },
    hot: { type: "boolean", default: false },
    postgres: { type: "boolean", default: false },
  },
});
const HOT = values.hot;
const RUNS = HOT && values.runs === "1000000" ? 1_051_000 : Number(values.runs);
const REQUESTS = Number(values.requests);
const mb = (b: number) => `${(b / 1024 / 1024).toFixed(1)} MiB`;

const keep = values.postgres ? undefined : values.keep;
const dataDir = keep ?? fs.mkdtempSync(path.join(os.tmpdir(), "sluice-monitor-bench-"));
const databaseUrl = values.postgres ? await (await startPostgres()).createDatabase() : undefined;
const flowsFile = path.join(dataDir, "flows.json");
let flows: SeededFlow[];
if (keep && fs.existsSync(flowsFile)) {
  flows = JSON.parse(fs.readFileSync(flowsFile, "utf8")) as SeededFlow[];
  console.log(`reusing ${dataDir}: ${mb(dbBytes(dataDir))}`);
} else {
  const sizes: string[] = [];
  const t0 = performance.now();
  flows = await seedRuns({
    dataDir,
    databaseUrl,
    hot: HOT,
    runs: RUNS,
    flows: HOT ? 1 : Number(values.flows),
    spaces: HOT ? 1 : 2,
    onCommit: (n, db) => {
      if (n === 100_000 && db)
        sizes.push(`${n.toLocaleString("en")} runs: ${mb(dbBytes(dataDir, db))}`);
      if (n % 200_000 === 0)
        console.log(
          `  seeded ${n.toLocaleString("en")} (${((performance.now() - t0) / 1000).toFixed(1)} s)`,
        );
    },
  });
  console.log(
    `seeded ${RUNS.toLocaleString("en")} runs over ${flows.length} flows in ${((performance.now() - t0) / 1000).toFixed(1)} s`,
  );
  if (!databaseUrl) {
    const end = dbBytes(dataDir);
    console.log(
      `database size: ${sizes.join("; ")}; ${RUNS.toLocaleString("en")} runs (indexes rebuilt, ANALYZE, checkpoint): ${mb(end)}`,
    );
  }
  fs.writeFileSync(flowsFile, JSON.stringify(flows));
}

// Sample run ids and per-flow totals (for deep pages) straight from the database.
const raw = databaseUrl
  ? null
  : new DatabaseSync(path.join(dataDir, "sluice.db"), { readOnly: true });
const pgRaw = databaseUrl ? new pg.Client({ connectionString: databaseUrl }) : null;
await pgRaw?.connect();
async function rawAll<T>(sqliteSql: string, pgSql = sqliteSql): Promise<T[]> {
  if (pgRaw) return (await pgRaw.query(pgSql)).rows as T[];
  return raw?.prepare(sqliteSql).all() as T[];
}
const totals = new Map<string, number>(
  (
    await rawAll<{ element_id: number; total_runs: number }>(
      "SELECT element_id, total_runs FROM element_run_stats",
    )
  ).map((r) => [String(r.element_id), Number(r.total_runs)]),
);
const sampleRuns = await rawAll<{ id: string; app: string; space: string }>(
  "SELECT id, app, space FROM runs WHERE rowid % 997 = 0 LIMIT 2000",
  "SELECT id, app, space FROM runs TABLESAMPLE SYSTEM (1) LIMIT 2000",
);
const busiest = [...flows].sort(
  (a, b) => (totals.get(b.elementId) ?? 0) - (totals.get(a.elementId) ?? 0),
)[0] as SeededFlow;
const sorted = [...totals.values()].sort((a, b) => a - b);
console.log(
  `runs per flow: min ${sorted[0]}, median ${sorted[sorted.length >> 1]}, max ${sorted[sorted.length - 1]} (${busiest.name})`,
);

const config = loadConfig({
  DATA_DIR: dataDir,
  SCRIPT_PREFORK: "1",
  PORT: "0",
  ...(databaseUrl ? { DATABASE_URL: databaseUrl } : {}),
});
const services = await createServices({ config, logger: pino({ level: "silent" }) });
const app = await buildApp(services);
await app.listen({ port: 0, host: "127.0.0.1" });
const base = `http://127.0.0.1:${(app.server.address() as AddressInfo).port}${config.dataflowPrefix}`;
const headersOf = (f: SeededFlow) => ({
  app: f.scope.app,
  space: f.scope.space,
  user: "bench",
  "content-type": "application/json",
});

let seq = 0;
const pick = <T>(list: readonly T[]): T => list[seq++ % list.length] as T;
const shuffled = [...flows].sort(
  (a, b) => ((Number(a.elementId) * 7919) % 211) - ((Number(b.elementId) * 7919) % 211),
);

type Req = { method: "GET" | "POST"; url: string; headers: Record<string, string>; body?: unknown };
const runsReq = (f: SeededFlow, body: Record<string, unknown>): Req => ({
  method: "POST",
  url: `${base}/monitor/runs`,
  headers: headersOf(f),
  body: { elementName: f.name, pageNo: 0, pageSize: 20, ...body },
});
const deepPage = (f: SeededFlow, pageSize: number, depth: number) =>
  Math.max(0, Math.floor(((totals.get(f.elementId) ?? 0) * depth) / pageSize));
const lastHour = Date.UTC(2025, 0, 1) + 20 * 60_000;

const MIXES: Record<string, (f: SeededFlow) => Req> = {
  "runs: default page 0": (f) => runsReq(f, {}),
  "runs: status FAILURE": (f) => runsReq(f, { runStatusFilter: ["FAILURE"] }),
  "runs: trigger+version": (f) =>
    runsReq(f, { triggerFilter: ["SCHEDULED", "API"], versionFilter: ["2", "3"] }),
  "runs: quickSearch": (f) => runsReq(f, { quickSearch: `user${seq % 50}` }),
  "runs: runName contains": (f) =>
    runsReq(f, { colFilters: [{ name: "runName", value: "backfill-1" }] }),
  "runs: startTime window, by duration desc": (f) =>
    runsReq(f, {
      colFilters: [{ name: "startTime", from: lastHour, to: lastHour + 10 * 60_000 }],
      orderBy: [{ name: "duration", asc: false }],
    }),
  "runs: deep page 90% (size 100)": (f) =>
    runsReq(f, { pageSize: 100, pageNo: deepPage(f, 100, 0.9) }),
  "runs: deep page 50%, by endTime asc": (f) =>
    runsReq(f, { pageNo: deepPage(f, 20, 0.5), orderBy: [{ name: "endTime", asc: true }] }),
  "runs: by runStatus, page 10": (f) =>
    runsReq(f, { pageNo: 10, orderBy: [{ name: "runStatus" }] }),
  "runs: busiest flow, default": () => runsReq(busiest, {}),
  "runs: busiest flow, quickSearch": () => runsReq(busiest, { quickSearch: "user7" }),
  "runs: busiest flow, deep page 90%": () =>
    runsReq(busiest, { pageSize: 100, pageNo: deepPage(busiest, 100, 0.9) }),
  "GET /monitor/flows": (f) => ({
    method: "GET",
    url: `${base}/monitor/flows`,
    headers: headersOf(f),
  }),
  "GET /monitor/run": () => {
    const r = pick(sampleRuns);
    return {
      method: "GET",
      url: `${base}/monitor/run?runId=${r.id}`,
      headers: { app: r.app, space: r.space, user: "bench" },
    };
  },
};

// One hot flow (--hot): the run list a user pages through, on a million runs of one flow.
const HOT_MIXES: Record<string, (f: SeededFlow) => Req> = {
  "hot: default page 0": (f) => runsReq(f, {}),
  "hot: status FAILURE": (f) => runsReq(f, { runStatusFilter: ["FAILURE"] }),
  "hot: quickSearch": (f) => runsReq(f, { quickSearch: `user${seq % 50}` }),
  "hot: runName contains": (f) =>
    runsReq(f, { colFilters: [{ name: "runName", value: `backfill-${100_000 + (seq % 900)}` }] }),
  "hot: deep page 90% (size 100)": (f) =>
    runsReq(f, { pageSize: 100, pageNo: deepPage(f, 100, 0.9) }),
  "hot: deep page 50%": (f) => runsReq(f, { pageNo: deepPage(f, 20, 0.5) }),
  "hot: trigger API, by endTime desc": (f) =>
    runsReq(f, { triggerFilter: ["API"], orderBy: [{ name: "endTime", asc: false }] }),
};

async function send(r: Req): Promise<number> {
  const t = performance.now();
  const res = await fetch(r.url, {
    method: r.method,
    headers: r.headers,
    body: r.body === undefined ? undefined : JSON.stringify(r.body),
  });
  const body = (await res.json()) as { status: boolean; message: string };
  const ms = performance.now() - t;
  if (!body.status) throw new Error(`${r.method} ${r.url} failed: ${body.message}`);
  return ms;
}

const pct = (xs: number[], p: number) =>
  xs[Math.min(xs.length - 1, Math.floor((p / 100) * xs.length))] as number;
console.log(
  `\n${"mix".padEnd(42)} ${"p50".padStart(8)} ${"p95".padStart(8)} ${"p99".padStart(8)}   (ms, ${REQUESTS} requests each, sequential)`,
);
for (const [name, make] of Object.entries(HOT ? HOT_MIXES : MIXES)) {
  for (let i = 0; i < 5; i++) await send(make(pick(shuffled))); // warm-up
  const times: number[] = [];
  for (let i = 0; i < REQUESTS; i++) times.push(await send(make(pick(shuffled))));
  times.sort((a, b) => a - b);
  console.log(
    `${name.padEnd(42)} ${pct(times, 50).toFixed(1).padStart(8)} ${pct(times, 95).toFixed(1).padStart(8)} ${pct(times, 99).toFixed(1).padStart(8)}`,
  );
}

// Another tenant's GET /health while one caller searches the hot flow back to back: on SQLite the
// search reads on the store's reading thread, not the service's (docs/security.md, "Monitoring
// reads"), so /health waits for no search.
if (HOT) {
  const root = base.slice(0, -config.dataflowPrefix.length);
  let searching = true;
  let searches = 0;
  const searcher = (async () => {
    while (searching) {
      await send((HOT_MIXES["hot: quickSearch"] as (f: SeededFlow) => Req)(pick(shuffled)));
      searches++;
    }
  })();
  const times: number[] = [];
  while (searches < 10 || times.length < REQUESTS * 4)
    times.push(await send({ method: "GET", url: `${root}/health`, headers: {} }));
  searching = false;
  await searcher;
  times.sort((a, b) => a - b);
  console.log(
    `${"GET /health during back-to-back quickSearch".padEnd(42)} ${pct(times, 50).toFixed(1).padStart(8)} ${pct(times, 95).toFixed(1).padStart(8)} ${pct(times, 99).toFixed(1).padStart(8)}   (${times.length} requests, max ${(times[times.length - 1] as number).toFixed(1)} ms, ${searches} searches meanwhile)`,
  );
}

if (values.explain && raw) {
  const f = busiest;
  const plan = (label: string, sql: string, ...params: (string | number)[]) => {
    const rows = raw.prepare(`EXPLAIN QUERY PLAN ${sql}`).all(...params) as { detail: string }[];
    console.log(`\n${label}\n${rows.map((r) => `  ${r.detail}`).join("\n")}`);
  };
  const scope = [f.scope.app, f.scope.space, Number(f.elementId)] as const;
  plan(
    "counts",
    `select status, count(*) from runs where app = ? and space = ? and element_id = ? group by status`,
    ...scope,
  );
  plan(
    "page, default order",
    `select id from runs where app = ? and space = ? and element_id = ? order by create_time desc, id desc limit 20 offset 4000`,
    ...scope,
  );
  plan(
    "page, by endTime",
    `select id from runs where app = ? and space = ? and element_id = ? order by end_time asc, id asc limit 20 offset 4000`,
    ...scope,
  );
  plan(
    "page, status filter",
    `select id from runs where app = ? and space = ? and element_id = ? and status in (?) order by create_time desc, id desc limit 20`,
    ...scope,
    "FAILURE",
  );
  plan(
    "last run per flow",
    `select (select id from runs lr where lr.app = ? and lr.space = ? and lr.element_id = e.id order by create_time desc, id desc limit 1) from elements e where e.app = ? and e.space = ?`,
    f.scope.app,
    f.scope.space,
    f.scope.app,
    f.scope.space,
  );
}

raw?.close();
await pgRaw?.end();
await app.close();
await services.close();
if (!keep) fs.rmSync(dataDir, { recursive: true, force: true });
