/**
 * bench/script-latency: external run-sync of a trivial script through real HTTP on loopback, at
 * concurrency 1, 8 and 32, against a naive runner that spawns /usr/bin/python3 per task (measured in
 * the same run, in-process, without HTTP — which flatters the baseline).
 *
 *   npm run bench:script-latency            (N=2000 per level; BENCH_N to change)
 */

import { type Figures, httpJson, load, row, startBenchServer, uploadScript } from "./lib.ts";
import { createNaiveRunner } from "./naive-runner.ts";

const N = Number(process.env.BENCH_N ?? 2000);
const SCRIPT = "def main(p):\n    return p\n";

const server = await startBenchServer({ SCRIPT_PREFORK: "16" });
const sluice: Figures[] = [];
const naive: Figures[] = [];
try {
  await uploadScript(server.url, "echo", SCRIPT);
  const url = `${server.url}/script/external/echo/run-sync`;
  const call = async (i: number) => {
    const res = await httpJson("POST", url, `{"i":${i}}`);
    const body = res.json as { i?: number };
    if (body.i !== i || res.headers["x-task-status"] !== "SUCCESS")
      throw new Error(`bad answer ${JSON.stringify(body)}`);
  };
  await load(8, 200, call); // warm-up: JIT, prepared statements, preforked children
  for (const c of [1, 8, 32]) {
    const f = await load(c, N, call);
    sluice.push(f);
    console.log(row("sluice external run-sync (HTTP)", f));
  }
} finally {
  await server.stop();
}

const runner = createNaiveRunner();
const source = { name: "echo", kind: "module" as const, content: Buffer.from(SCRIPT) };
for (const c of [1, 8, 32]) {
  const f = await load(c, Math.min(N, 300), async (i) => {
    const o = await runner.run({ taskId: `n${i}`, source, parameter: { i } });
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
