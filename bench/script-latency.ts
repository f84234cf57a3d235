/**
 * bench/script-latency: external run-sync of a trivial script through real HTTP on loopback, at
 * concurrency 1, 8 and 32, against two baselines measured in the same run:
 * - the Python runner alone, in this process (no HTTP, no store: bench/script-runner's floor),
 *   in rounds alternated with the HTTP rounds at c=1 and c=8, so that this VM's drift between
 *   minutes hits both alike; the medians give issue 15's ratio (docs in bench/README.md);
 * - a naive runner that spawns /usr/bin/python3 per task (in-process, without HTTP, which
 *   flatters it).
 * Each row also splits the machine's CPU per call by process: Python (the tasks, their zygote
 * and sandbox), the server's Node process, this process (the load generator, or the runner's
 * Node side when it runs alone).
 *
 *   npm run bench:script-latency       (BENCH_N=1500 calls per level, BENCH_ROUNDS=3)
 */
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { loadConfig } from "../src/config.ts";
import { createPythonRunner } from "../src/scripts/python-runner.ts";
import { type Figures, httpJson, load, row, startBenchServer, uploadScript } from "./lib.ts";
import { createNaiveRunner } from "./naive-runner.ts";
import { cpuByTree, ownCpu, snapshot } from "./process-cpu.ts";

const N = Number(process.env.BENCH_N ?? 1500);
const ROUNDS = Math.max(1, Number(process.env.BENCH_ROUNDS ?? 3));
const SCRIPT = "def main(p):\n    return p\n";
const source = { name: "echo", kind: "module" as const, content: Buffer.from(SCRIPT) };
const silent = { info() {}, warn() {}, error() {}, debug() {} };

type Call = (i: number) => Promise<void>;

/** One measured level, with the machine's CPU per call split by process. */
async function measure(label: string, c: number, n: number, call: Call, serverPid: number) {
  const before = snapshot();
  const f = await load(c, n, call);
  const after = snapshot();
  const trees = cpuByTree(
    before,
    after,
    new Map([
      [serverPid, "server"],
      [process.pid, "bench"],
    ]),
  );
  const serverNode = ownCpu(before, after, serverPid);
  const benchNode = ownCpu(before, after, process.pid);
  const python = (trees.get("server") ?? 0) - serverNode + (trees.get("bench") ?? 0) - benchNode;
  const per = (ms: number) => (ms / n).toFixed(2);
  console.log(
    `${row(label, f)}  [python ${per(python)}, server node ${per(serverNode)}, this node ${per(benchNode)}]`,
  );
  return f;
}

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)] as number;

const server = await startBenchServer({ SCRIPT_PREFORK: "16" });
const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), "sluice-bench-runner-"));
const config = loadConfig({ DATA_DIR: dataDir, SCRIPT_PREFORK: "16" });
const runner = await createPythonRunner({
  config: { python: config.python, limits: config.limits, dataDir },
  logger: silent,
});
const sluice: Figures[] = [];
const verdicts: string[] = [];
try {
  await uploadScript(server.url, "echo", SCRIPT);
  const url = `${server.url}/script/external/echo/run-sync`;
  const http: Call = async (i) => {
    const res = await httpJson("POST", url, `{"i":${i}}`);
    const body = res.json as { i?: number };
    if (body.i !== i || res.headers["x-task-status"] !== "SUCCESS")
      throw new Error(`bad answer ${JSON.stringify(body)}`);
  };
  let taskNo = 0;
  const alone: Call = async (i) => {
    const o = await runner.run({ taskId: `t${taskNo++}`, source, parameter: { i } });
    if (o.status !== "SUCCESS") throw new Error(JSON.stringify(o));
  };
  // Warm-up: JIT, prepared statements, preforked children, on both sides.
  await load(8, 200, http);
  await load(8, 200, alone);
  const perRound = Math.max(1, Math.round(N / ROUNDS));
  const pairs = new Map<number, { alone: Figures[]; http: Figures[] }>();
  for (const c of [1, 8]) {
    const pair = { alone: [] as Figures[], http: [] as Figures[] };
    for (let r = 0; r < ROUNDS; r++) {
      pair.alone.push(await measure("runner alone (in-process)", c, perRound, alone, server.pid));
      pair.http.push(
        await measure("sluice external run-sync (HTTP)", c, perRound, http, server.pid),
      );
    }
    pairs.set(c, pair);
    sluice.push(pair.http[Math.floor(ROUNDS / 2)] as Figures);
  }
  sluice.push(await measure("sluice external run-sync (HTTP)", 32, N, http, server.pid));

  const one = pairs.get(1) as { alone: Figures[]; http: Figures[] };
  const eight = pairs.get(8) as { alone: Figures[]; http: Figures[] };
  const p50 = median(one.http.map((f) => f.p50));
  const p50Alone = median(one.alone.map((f) => f.p50));
  const rate = median(eight.http.map((f) => f.perSecond));
  const rateAlone = median(eight.alone.map((f) => f.perSecond));
  const target = (what: string, ok: boolean, figure: string) =>
    verdicts.push(`${ok ? "met    " : "MISSED "} ${what}: ${figure}`);
  target(
    "run-sync at c=8 >= 90 % of the runner alone",
    rate >= 0.9 * rateAlone,
    `${((100 * rate) / rateAlone).toFixed(0)} % (${rate.toFixed(0)}/s vs ${rateAlone.toFixed(0)}/s, medians of ${ROUNDS} alternated rounds)`,
  );
  target(
    "run-sync at c=1 p50 <= 1.0 ms",
    p50 <= 1.0,
    `${p50.toFixed(2)} ms (the runner alone: ${p50Alone.toFixed(2)} ms)`,
  );
} finally {
  await server.stop();
  await runner.close();
  fs.rmSync(dataDir, { recursive: true, force: true });
}

const naiveRunner = createNaiveRunner();
const naive: Figures[] = [];
for (const c of [1, 8, 32]) {
  const f = await load(c, Math.min(N, 300), async (i) => {
    const o = await naiveRunner.run({ taskId: `n${i}`, source, parameter: { i } });
    if (o.status !== "SUCCESS") throw new Error(`naive runner failed: ${JSON.stringify(o.error)}`);
  });
  naive.push(f);
  console.log(row("naive spawn-per-task (in-process)", f));
}

console.log("\nthroughput ratio sluice / naive:");
for (const [i, s] of sluice.entries()) {
  const b = naive[i] as Figures;
  console.log(
    `  c=${s.concurrency}: ${(s.perSecond / b.perSecond).toFixed(1)}x   p50 ${s.p50.toFixed(2)} ms vs ${b.p50.toFixed(2)} ms`,
  );
}
console.log(`\nissue 15 targets (this run):\n  ${verdicts.join("\n  ")}`);
