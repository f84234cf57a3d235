import { NO_SCRIPT_FLOW } from "../test/helpers/flows.ts";
import { httpJson, load, postJson, row, startBenchServer } from "./lib.ts";
import { cpuByTree, ownCpu, snapshot } from "./process-cpu.ts";
const DF = "/dataflow-3-0";
const PARAM = { orders: [{ amount: 2, qty: 3 }, { amount: 0, qty: 1 }, { amount: 5, qty: 2 }] };
const env: Record<string, string> = process.env.PROF ? { NODE_OPTIONS: `--cpu-prof --cpu-prof-dir=${process.env.PROF}` } : {};
const server = await startBenchServer(env);
await postJson(`${server.url}${DF}/flow/deploy`, { elementName: "plain", revisionName: "b", path: "/bench", flow: NO_SCRIPT_FLOW, configure: { logContent: "CONCISE" } });
await postJson(`${server.url}${DF}/flow/activate`, { elementName: "plain" });
const call = async () => { const r = await httpJson("POST", `${server.url}${DF}/run-sync`, JSON.stringify({ elementName: "plain", parameter: PARAM })); if ((r.json as {status:boolean}).status !== true) throw new Error(JSON.stringify(r.json)); };
await load(8, 1000, call);
const N = Number(process.env.BENCH_N ?? 6000);
for (let r = 0; r < Number(process.env.ROUNDS ?? 3); r++) {
  const b = snapshot(); const f = await load(8, N, call); const a = snapshot();
  console.log(row("run-sync c=8", f), `server node ${(ownCpu(b, a, server.pid) / N * 1000).toFixed(0)} us/run, bench ${(ownCpu(b, a, process.pid) / N * 1000).toFixed(0)} us/run`);
}
await server.stop();
