/**
 * bench/run-writes: the store's CPU per run for the write pattern of each path a run takes
 * (docs/architecture.md, "Group commit"), 8 runs per turn of the event loop. No HTTP, no
 * executor: only the run rows. CPU is this process's (Node and SQLite; on PostgreSQL without the
 * server's own).
 *
 *   node bench/run-writes.ts              (BENCH_N=8000 runs per pattern and round, 3 rounds)
 *   node bench/run-writes.ts --postgres   (on a throwaway PostgreSQL)
 *
 * The first pattern, a run-sync's one insert of an ended run, is the baseline of the ratios.
 */
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { parseArgs } from "node:util";
import { openStore } from "../src/store/open-store.ts";
import type { NewRun, RunEnd } from "../src/store/types.ts";
import { startPostgres } from "../test/helpers/pg.ts";
import { newRun } from "../test/helpers/runs.ts";

const N = Number(process.env.BENCH_N ?? 8000);
const PER_TURN = 8;
const T0 = Date.now();
const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), "sluice-bench-writes-"));
const { values } = parseArgs({ options: { postgres: { type: "boolean", default: false } } });
const databaseUrl = values.postgres ? await (await startPostgres()).createDatabase() : undefined;
const store = await openStore({ dataDir, databaseUrl });
const end: RunEnd = {
  status: "SUCCESS",
  endTime: T0 + 1,
  summary: "3 nodes",
  result: '{"total":11}',
  detail: { nodes: [{ nodeId: "in", status: "SUCCESS" }] },
};
const started = () =>
  newRun({
    elementType: "DPL",
    elementId: "1",
    status: "STARTED",
    startTime: T0,
    runName: "plain-20261127-000000",
    runParam: '{"orders":[{"amount":2,"qty":3}]}',
  });

/** Each pattern writes N runs, PER_TURN of them issued in one turn. */
const patterns: [string, (runs: NewRun[], prev: NewRun[]) => Promise<unknown>][] = [
  ["run-sync: one insert, ended", (runs) => Promise.all(runs.map((r) => store.insertRun(r, end)))],
  [
    "started at once: insert, end with the next turn's inserts",
    (runs, prev) =>
      Promise.all([
        ...runs.map((r) => store.insertRun(r)),
        ...prev.map((r) => store.endRun(r.id, end)),
      ]),
  ],
  [
    "queued: insert, start, end (3 turns)",
    async (runs) => {
      const queued = runs.map((r) => ({ ...r, status: "QUEUED" as const, startTime: null }));
      await Promise.all(queued.map((r) => store.insertRun(r)));
      await Promise.all(queued.map((r) => store.startRun(r.id, T0, "n1")));
      await Promise.all(queued.map((r) => store.endRun(r.id, end)));
    },
  ],
];

const cpuMs = () => {
  const u = process.cpuUsage();
  return (u.user + u.system) / 1000;
};

async function measure(write: (runs: NewRun[], prev: NewRun[]) => Promise<unknown>) {
  const c0 = cpuMs();
  let prev: NewRun[] = [];
  for (let i = 0; i < N; i += PER_TURN) {
    const runs = Array.from({ length: PER_TURN }, started);
    await write(runs, prev);
    prev = runs;
  }
  // The last turn's ends, for the pattern that leaves them to the next turn.
  await Promise.all(prev.map((r) => store.endRun(r.id, end)));
  return ((cpuMs() - c0) / N) * 1000;
}

try {
  const rounds: number[][] = [];
  // Round 0 warms up; patterns alternate within each round, so drift hits them alike.
  for (let round = 0; round < 4; round++) {
    const us: number[] = [];
    for (const [, write] of patterns) us.push(await measure(write));
    if (round > 0) rounds.push(us);
  }
  const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)] ?? 0;
  const base = median(rounds.map((r) => r[0] ?? 0));
  console.log(`${store.dialect}: ${N} runs per pattern, ${PER_TURN} per turn, 3 rounds`);
  patterns.forEach(([name], k) => {
    const all = rounds.map((r) => r[k] ?? 0);
    const m = median(all);
    console.log(
      `${name.padEnd(58)} ${m.toFixed(1).padStart(6)} µs CPU/run (${all.map((x) => x.toFixed(0)).join(", ")})  ${(m / base).toFixed(2)}× run-sync`,
    );
  });
} finally {
  await store.close();
  fs.rmSync(dataDir, { recursive: true, force: true });
}
