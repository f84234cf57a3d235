/**
 * bench/cluster-profile: where a cluster's time goes. One API process and one worker on a
 * throwaway PostgreSQL, both with `--cpu-prof`; BENCH_RUNS async no-script flow runs through the
 * API, every result read, then both processes stop cleanly (SIGTERM) so their profiles are
 * written. Prints each process's busy time by the largest self-time groups (node_modules
 * package, source file or native function) and keeps the .cpuprofile files for a closer look.
 *
 *   node bench/cluster-profile.ts        (BENCH_RUNS=1500, BENCH_WORKERS=1)
 */
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { NO_SCRIPT_FLOW } from "../test/helpers/flows.ts";
import { startPostgres } from "../test/helpers/pg.ts";
import { startProcess } from "../test/helpers/process.ts";
import { httpJson, load, postJson } from "./lib.ts";

const RUNS = Number(process.env.BENCH_RUNS ?? 1500);
/** Worker processes beside the API one, each profiled. */
const WORKERS = Number(process.env.BENCH_WORKERS ?? 1);
const DF = "/dataflow-3-0";
const profDir = fs.mkdtempSync(path.join(os.tmpdir(), "sluice-cprof-"));
const dirs: string[] = [];

interface ProfileNode {
  id: number;
  callFrame: { functionName: string; url: string };
}
interface Profile {
  nodes: ProfileNode[];
  samples: number[];
  timeDeltas: number[];
}

/** Self time (ms) per group: a package under node_modules, a source file, or a native function. */
function summarize(file: string): string {
  const p = JSON.parse(fs.readFileSync(file, "utf8")) as Profile;
  const byId = new Map(p.nodes.map((n) => [n.id, n]));
  const groups = new Map<string, number>();
  p.samples.forEach((id, i) => {
    const { functionName, url } = byId.get(id)?.callFrame ?? { functionName: "?", url: "" };
    const pkg = /node_modules\/((?:@[^/]+\/)?[^/]+)/.exec(url)?.[1];
    const src = /\/(src\/.*)$/.exec(url)?.[1];
    const key = pkg ?? src ?? (url.startsWith("node:") ? url : functionName || "(anonymous)");
    groups.set(key, (groups.get(key) ?? 0) + (p.timeDeltas[i] ?? 0) / 1000);
  });
  const idle = groups.get("(idle)") ?? 0;
  groups.delete("(idle)");
  const busy = [...groups.values()].reduce((a, b) => a + b, 0);
  const top = [...groups.entries()].sort((a, b) => b[1] - a[1]).slice(0, 12);
  return [
    `busy ${busy.toFixed(0)} ms, idle ${idle.toFixed(0)} ms`,
    ...top.map(([k, v]) => `  ${v.toFixed(0).padStart(6)} ms ${k}`),
  ].join("\n");
}

const pgServer = await startPostgres();
try {
  const databaseUrl = await pgServer.createDatabase();
  const spawnNode = (role: "serve" | "worker", env: Record<string, string>) => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), "sluice-cprof-data-"));
    dirs.push(dir);
    return startProcess(
      {
        DATA_DIR: dir,
        LOG_LEVEL: "error",
        DATABASE_URL: databaseUrl,
        LIMIT_QUEUED_RUNS: "100000",
        LIMIT_QUEUED_RUNS_PER_APP: "100000",
        NODE_OPTIONS: `--cpu-prof --cpu-prof-dir=${path.join(profDir, role)}`,
        ...env,
      },
      role,
    );
  };
  const api = await spawnNode("serve", { SLUICE_ROLE: "api" });
  const workers = [];
  for (let i = 0; i < WORKERS; i++) workers.push(await spawnNode("worker", {}));
  await postJson(`${api.url}${DF}/flow/deploy`, {
    elementName: "plain",
    revisionName: "b",
    path: "/bench",
    flow: NO_SCRIPT_FLOW,
    configure: { logContent: "CONCISE" },
  });
  await postJson(`${api.url}${DF}/flow/activate`, { elementName: "plain" });
  const ids: string[] = [];
  const t0 = performance.now();
  await load(16, RUNS, async () => {
    const r = await postJson(`${api.url}${DF}/run`, {
      elementName: "plain",
      parameter: { orders: [{ amount: 2, qty: 3 }] },
    });
    ids.push((r.json as { data: string }).data);
  });
  const submitted = performance.now();
  for (const id of ids) await httpJson("GET", `${api.url}${DF}/run/${id}/result?timeout=300`);
  const done = performance.now();
  console.log(
    `submitted ${(RUNS / ((submitted - t0) / 1000)).toFixed(0)} runs/s, ` +
      `all ended ${(RUNS / ((done - t0) / 1000)).toFixed(0)} runs/s`,
  );
  for (const p of [api, ...workers]) {
    p.child.kill("SIGTERM");
    await new Promise((r) => p.child.once("exit", r));
  }
  for (const role of ["serve", "worker"]) {
    const dir = path.join(profDir, role);
    for (const f of fs.readdirSync(dir))
      console.log(`${role} ${f}\n${summarize(path.join(dir, f))}`);
  }
  console.log(`profiles kept in ${profDir}`);
} finally {
  await pgServer.stop();
  for (const d of dirs) fs.rmSync(d, { recursive: true, force: true });
}
