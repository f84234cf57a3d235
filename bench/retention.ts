/**
 * Run retention at scale (docs/retention.md): seeds N finished runs (default 1,000,000) over 200
 * flows in 2 spaces (bench/seed-runs.ts, the monitoring bench's generator; every run ended in
 * 2025), boots the real service with RUN_RETENTION_DAYS=1, times POST /monitor/runs before the
 * purge (baseline), then runs one purge pass of every seeded run while the same requests go on,
 * and prints the purge rate and the latencies during the purge against the baseline, with the
 * event loop's delay during the purge.
 *
 *   node bench/retention.ts                     # 1,000,000 runs, SQLite
 *   node bench/retention.ts --runs 100000       # on a busy machine
 *   node bench/retention.ts --postgres          # on a throwaway PostgreSQL
 *   node bench/retention.ts --batch 500         # RUN_RETENTION_BATCH (default: the store's)
 */
import fs from "node:fs";
import type { AddressInfo } from "node:net";
import os from "node:os";
import path from "node:path";
import { monitorEventLoopDelay } from "node:perf_hooks";
import { parseArgs } from "node:util";
import pino from "pino";
import { buildApp } from "../src/app.ts";
import { loadConfig } from "../src/config.ts";
import { createServices } from "../src/services.ts";
import { startPostgres } from "../test/helpers/pg.ts";
import { HttpClient } from "./http-client.ts";
import { percentile } from "./lib.ts";
import { type SeededFlow, seedRuns } from "./seed-runs.ts";

const { values } = parseArgs({
  options: {
    runs: { type: "string", default: "1000000" },
    flows: { type: "string", default: "200" },
    baseline: { type: "string", default: "400" },
    batch: { type: "string" },
    postgres: { type: "boolean", default: false },
  },
});
const RUNS = Number(values.runs);
const store = values.postgres ? "PostgreSQL" : "SQLite";

const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), "sluice-retention-bench-"));
const databaseUrl = values.postgres ? await (await startPostgres()).createDatabase() : undefined;
const t0 = performance.now();
const flows = await seedRuns({
  dataDir,
  databaseUrl,
  runs: RUNS,
  flows: Number(values.flows),
  spaces: 2,
});
console.log(
  `${store}: seeded ${RUNS.toLocaleString("en")} runs over ${flows.length} flows in ${((performance.now() - t0) / 1000).toFixed(1)} s`,
);

const config = loadConfig({
  DATA_DIR: dataDir,
  SCRIPT_PREFORK: "1",
  PORT: "0",
  RUN_RETENTION_DAYS: "1",
  RUN_RETENTION_SWEEP_MS: "0",
  ...(values.batch ? { RUN_RETENTION_BATCH: values.batch } : {}),
  ...(databaseUrl ? { DATABASE_URL: databaseUrl } : {}),
});
const services = await createServices({ config, logger: pino({ level: "silent" }) });
const app = await buildApp(services);
await app.listen({ port: 0, host: "127.0.0.1" });
const base = `http://127.0.0.1:${(app.server.address() as AddressInfo).port}${config.dataflowPrefix}`;
const client = new HttpClient();

let seq = 0;
/** The monitoring bench's two most common mixes, over the flows in turn. */
async function monitorRuns(): Promise<number> {
  const f = flows[(seq * 7919) % flows.length] as SeededFlow;
  const body = { elementName: f.name, pageNo: 0, pageSize: 20 };
  if (seq++ % 2) Object.assign(body, { runStatusFilter: ["FAILURE"] });
  const headers = {
    app: f.scope.app,
    space: f.scope.space,
    user: "bench",
    "content-type": "application/json",
  };
  const t = performance.now();
  const res = await client.request("POST", `${base}/monitor/runs`, JSON.stringify(body), headers);
  const ms = performance.now() - t;
  const json = JSON.parse(res.body.toString("utf8")) as { status: boolean };
  if (!json.status) throw new Error(`monitor/runs failed: ${res.body.toString("utf8")}`);
  return ms;
}

const figures = (l: number[]) => {
  const s = [...l].sort((a, b) => a - b);
  const f = (p: number) => percentile(s, p).toFixed(1).padStart(6);
  return `n=${String(s.length).padStart(5)}  p50=${f(50)} ms  p95=${f(95)} ms  p99=${f(99)} ms  max=${f(100)} ms`;
};

for (let i = 0; i < 20; i++) await monitorRuns(); // warm-up
const before: number[] = [];
for (let i = 0; i < Number(values.baseline); i++) before.push(await monitorRuns());

const previewStart = performance.now();
const preview = await services.retention.preview(null);
const expected = preview.reduce((n, p) => n + p.runs, 0);
const previewMs = performance.now() - previewStart;
const loop = monitorEventLoopDelay({ resolution: 5 });
loop.enable();
const during: number[] = [];
let done = false;
const started = performance.now();
const pass = services.retention.pass().finally(() => {
  done = true;
});
while (!done) during.push(await monitorRuns());
const result = await pass;
loop.disable();
const seconds = (performance.now() - started) / 1000;

console.log(
  `purged ${result.runs.toLocaleString("en")} of ${expected.toLocaleString("en")} expired runs in ${seconds.toFixed(1)} s: ${Math.round(result.runs / seconds).toLocaleString("en")} runs/s (batch ${values.batch ?? "default"})`,
);
console.log(`dry run of every scope (${preview.length} elements): ${previewMs.toFixed(0)} ms`);
console.log(`POST /monitor/runs before the purge  ${figures(before)}`);
console.log(`POST /monitor/runs during the purge  ${figures(during)}`);
console.log(
  `event loop delay during the purge: p50 ${(loop.percentile(50) / 1e6).toFixed(1)} ms, p99 ${(loop.percentile(99) / 1e6).toFixed(1)} ms, max ${(loop.max / 1e6).toFixed(1)} ms`,
);
const left = await services.retention.preview(null);
console.log(`expired runs left: ${left.reduce((n, p) => n + p.runs, 0)}`);

await app.close();
await services.close();
fs.rmSync(dataDir, { recursive: true, force: true });
process.exit(0);
