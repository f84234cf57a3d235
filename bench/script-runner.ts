/**
 * bench/script-runner: the Python runner alone (no HTTP, no store), in-process, trivial script, at
 * concurrency 1 and 8 — the floor under bench/script-latency.
 *
 *   node bench/script-runner.ts            (N=2000 per level; BENCH_N to change)
 */
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { loadConfig } from "../src/config.ts";
import { createPythonRunner } from "../src/scripts/python-runner.ts";
import { load, row } from "./lib.ts";

const N = Number(process.env.BENCH_N ?? 2000);
const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), "sluice-bench-runner-"));
const config = loadConfig({
  DATA_DIR: dataDir,
  SCRIPT_PREFORK: process.env.SCRIPT_PREFORK ?? "16",
  ...Object.fromEntries(Object.entries(process.env).filter(([k]) => k.startsWith("SCRIPT_"))),
});
const silent = { info() {}, warn() {}, error() {}, debug() {} };
const runner = await createPythonRunner({
  config: { python: config.python, limits: config.limits, dataDir },
  logger: silent,
});
const source = {
  name: "echo",
  kind: "module" as const,
  content: Buffer.from("def main(p):\n    return p\n"),
};
const call = async (i: number) => {
  const o = await runner.run({ taskId: `t${i}`, source, parameter: { i } });
  if (o.status !== "SUCCESS") throw new Error(JSON.stringify(o));
};
try {
  await load(8, 300, call);
  for (const c of [1, 8])
    console.log(row("runner alone (in-process)", await load(c, N, (i) => call(i + c * N))));
} finally {
  await runner.close();
  fs.rmSync(dataDir, { recursive: true, force: true });
}
