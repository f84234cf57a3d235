/**
 * bench/cluster-throughput: one API process and 1, 2 or 4 worker processes on one PostgreSQL
 * (a throwaway cluster started here). For each worker count: async no-script flow runs per second
 * and script tasks per second, end to end (submit through the API, then collect every result).
 * The same workload on one embedded-mode process in the same run, and each cluster figure as a
 * ratio of it; with each, one caller's async flow run from submit to result (how soon a worker
 * hears of a job another process queued). Then run-sync p50 of the no-script flow through the
 * cluster versus embedded mode.
 *
 *   npm run bench:cluster-throughput     (BENCH_RUNS=3000 flow runs, BENCH_TASKS=600 tasks per level,
 *                                         BENCH_WORKERS=1,2,4)
 */
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { NO_SCRIPT_FLOW } from "../test/helpers/flows.ts";
import { startPostgres } from "../test/helpers/pg.ts";
import { killHard, startProcess } from "../test/helpers/process.ts";
import { httpJson, load, postJson, row, startBenchServer, uploadScript } from "./lib.ts";

const RUNS = Number(process.env.BENCH_RUNS ?? 3000);
const TASKS = Number(process.env.BENCH_TASKS ?? 600);
/** Worker counts to measure, e.g. BENCH_WORKERS=1 for a quick look. */
const WORKERS = (process.env.BENCH_WORKERS ?? "1,2,4").split(",").map(Number);
const DF = "/dataflow-3-0";
const PARAM = {
  orders: [
    { amount: 2, qty: 3 },
    { amount: 5, qty: 2 },
  ],
};
type Proc = Awaited<ReturnType<typeof startProcess>>;

const pgServer = await startPostgres();
const dirs: string[] = [];
const spawnNode = (role: "serve" | "worker", env: Record<string, string>) => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "sluice-cbench-"));
  dirs.push(dir);
  return startProcess(
    {
      DATA_DIR: dir,
      LOG_LEVEL: "error",
      SCRIPT_PREFORK: "8",
      LIMIT_QUEUED_RUNS: "100000",
      LIMIT_QUEUED_RUNS_PER_APP: "100000",
      ...env,
    },
    role,
  );
};

async function setUp(url: string): Promise<void> {
  await uploadScript(url, "echo", "def main(p):\n    return p\n");
  await postJson(`${url}${DF}/flow/deploy`, {
    elementName: "plain",
    revisionName: "b",
    path: "/bench",
    flow: NO_SCRIPT_FLOW,
    configure: { logContent: "CONCISE" },
  });
  await postJson(`${url}${DF}/flow/activate`, { elementName: "plain" });
}

/** Async flow runs/s and script tasks/s through the API at `api`, each after a warm-up. */
async function measure(api: string, label: string): Promise<{ runs: number; tasks: number }> {
  await setUp(api);
  const flowRuns = (n: number) =>
    throughput(
      n,
      async () =>
        (
          (await postJson(`${api}${DF}/run`, { elementName: "plain", parameter: PARAM })).json as {
            data: string;
          }
        ).data,
      (id) => `${api}${DF}/run/${id}/result?timeout=300`,
    );
  const scriptTasks = (n: number) =>
    throughput(
      n,
      async () =>
        ((await postJson(`${api}/script/external/echo/run`, { x: 1 })).json as { data: string })
          .data,
      (id) => `${api}/script/script/result/${id}?timeout=300`,
    );
  // A tenth first, unmeasured: JIT, PostgreSQL's caches and prepared statements, idle children.
  await flowRuns(Math.ceil(RUNS / 10));
  const runs = await flowRuns(RUNS);
  // One caller, one run at a time: the wait between a job's commit and a worker's fetch shows.
  const oneByOne = await load(1, 300, async () => {
    const id = (
      (await postJson(`${api}${DF}/run`, { elementName: "plain", parameter: PARAM })).json as {
        data: string;
      }
    ).data;
    const body = (await httpJson("GET", `${api}${DF}/run/${id}/result?timeout=30`)).json as {
      status: boolean;
    };
    if (!body.status) throw new Error(`run ${id}: ${JSON.stringify(body)}`);
  });
  console.log(row(`async run c=1, submit to result (${label})`, oneByOne));
  await scriptTasks(Math.ceil(TASKS / 10));
  const tasks = await scriptTasks(TASKS);
  return { runs, tasks };
}

/** Submits `n` jobs with 16 callers, then long-polls every result; returns jobs per second end to end. */
async function throughput(
  n: number,
  submit: () => Promise<string>,
  result: (id: string) => string,
): Promise<number> {
  const ids: string[] = [];
  const t0 = performance.now();
  await load(16, n, async () => {
    ids.push(await submit());
  });
  let next = 0;
  await Promise.all(
    Array.from({ length: 16 }, async () => {
      while (next < ids.length) {
        const id = ids[next++] as string;
        const body = (await httpJson("GET", result(id))).json as {
          status: boolean;
        };
        if (!body.status) throw new Error(`job ${id}: ${JSON.stringify(body)}`);
      }
    }),
  );
  return n / ((performance.now() - t0) / 1000);
}

try {
  const alone = await startBenchServer({
    SCRIPT_PREFORK: "8",
    LIMIT_QUEUED_RUNS: "100000",
    LIMIT_QUEUED_RUNS_PER_APP: "100000",
  });
  let alonePerSecond: { runs: number; tasks: number };
  try {
    alonePerSecond = await measure(alone.url, "embedded");
  } finally {
    await alone.stop();
  }
  console.log(
    `embedded: async flow runs ${alonePerSecond.runs.toFixed(0)}/s, script tasks ${alonePerSecond.tasks.toFixed(0)}/s`,
  );
  for (const workers of WORKERS) {
    const databaseUrl = await pgServer.createDatabase();
    const procs: Proc[] = [
      await spawnNode("serve", { DATABASE_URL: databaseUrl, SLUICE_ROLE: "api" }),
    ];
    for (let i = 0; i < workers; i++)
      procs.push(await spawnNode("worker", { DATABASE_URL: databaseUrl }));
    const api = procs[0]?.url ?? "";
    try {
      const { runs, tasks } = await measure(api, `${workers} worker${workers > 1 ? "s" : ""}`);
      const ratio = (v: number, of: number) => `${((100 * v) / of).toFixed(0)} % of embedded`;
      console.log(
        `workers=${workers}: async flow runs ${runs.toFixed(0)}/s (${ratio(runs, alonePerSecond.runs)}), ` +
          `script tasks ${tasks.toFixed(0)}/s (${ratio(tasks, alonePerSecond.tasks)})`,
      );
    } finally {
      for (const p of procs) await killHard(p.child);
    }
  }

  const syncCall = (url: string) => async () => {
    const r = await postJson(`${url}${DF}/run-sync`, { elementName: "plain", parameter: PARAM });
    if ((r.json as { status: boolean }).status !== true) throw new Error(JSON.stringify(r.json));
  };
  const cluster = await spawnNode("serve", { DATABASE_URL: await pgServer.createDatabase() });
  try {
    await setUp(cluster.url);
    await load(4, 200, syncCall(cluster.url));
    console.log(
      row("run-sync via cluster (PostgreSQL)", await load(1, 1000, syncCall(cluster.url))),
    );
  } finally {
    await killHard(cluster.child);
  }
  const embedded = await startBenchServer();
  try {
    await setUp(embedded.url);
    await load(4, 200, syncCall(embedded.url));
    console.log(row("run-sync embedded (SQLite)", await load(1, 1000, syncCall(embedded.url))));
  } finally {
    await embedded.stop();
  }
} finally {
  await pgServer.stop();
  for (const d of dirs) fs.rmSync(d, { recursive: true, force: true });
}
