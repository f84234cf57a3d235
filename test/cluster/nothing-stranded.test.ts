import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import path from "node:path";
import { after, before, describe, it } from "node:test";
import type pg from "pg";
import {
  type Cluster,
  deployFlow,
  HEARTBEAT_TIMEOUT_MS,
  type Proc,
  post,
  QUICK_NODES,
  startCluster,
} from "../helpers/cluster.ts";
import { DF, NO_SCRIPT_FLOW } from "../helpers/flows.ts";
import { killHard } from "../helpers/process.ts";
import type { PgRuns } from "../helpers/wait.ts";

/**
 * docs/cluster.md, "Nothing accepted is lost": whatever process dies, every accepted run ends
 * executed (or failed with a message), never QUEUED for good.
 */

const PARAM = { orders: [{ amount: 1, qty: 2 }] };

describe("cluster: nothing accepted is stranded", () => {
  let cluster: Cluster;
  let databaseUrl = "";
  let db: pg.Client;
  let runs: PgRuns;
  let api: Proc;

  /** Submits `n` async runs at once through `url`; the IDs of those accepted. */
  const submit = async (url: string, n: number, onAnswer?: (accepted: number) => void) => {
    const ids: string[] = [];
    await Promise.all(
      Array.from({ length: n }, async () => {
        try {
          const r = await post(`${url}${DF}/run`, { elementName: "plain", parameter: PARAM });
          if (r.status) ids.push(r.data as string);
        } catch {
          // The process died before answering: not accepted (it may still have been committed).
        }
        onAnswer?.(ids.length);
      }),
    );
    return ids;
  };

  /**
   * Resolves once no run is QUEUED or STARTED, re-counting whenever a run record changes; fails
   * the test if that takes `ms`.
   */
  const allFinished = (ms: number) =>
    runs.until(
      async (d) =>
        (
          await d.query<{ n: number }>(
            "select count(*)::int as n from runs where status in ('QUEUED', 'STARTED')",
          )
        ).rows[0]?.n,
      (n) => n === 0,
      "no run QUEUED or STARTED",
      ms,
    );

  const statuses = async (ids: readonly string[]) => {
    const { rows } = await db.query<{ id: string; status: string; end_time: string }>(
      "select id, status, end_time from runs where id = any($1)",
      [ids],
    );
    return new Map(rows.map((r) => [r.id, { status: r.status, endTime: Number(r.end_time) }]));
  };

  before(async () => {
    cluster = await startCluster({ env: QUICK_NODES, apis: 1 });
    databaseUrl = cluster.databaseUrl;
    [api] = cluster.apis as [Proc];
    runs = await cluster.runs();
    db = runs.db;
    await deployFlow(api.url, "plain", NO_SCRIPT_FLOW);
  });

  after(async () => {
    await cluster?.stop();
  });

  it("QUEUED runs whose job is gone (sent before runs and jobs committed together) are executed", async () => {
    const ids = await submit(api.url, 10);
    assert.equal(ids.length, 10);
    const gone = await db.query("delete from pgboss.job where data->>'runId' = any($1)", [ids]);
    assert.equal(gone.rowCount, 10, "each accepted run had its job, committed with it");
    await cluster.start("worker");
    await allFinished(HEARTBEAT_TIMEOUT_MS + 10_000);
    for (const [id, r] of await statuses(ids)) assert.equal(r.status, "SUCCESS", id);
  });

  it("a worker killed holding claimed, not yet started jobs: the other worker executes every one within the heartbeat timeout plus a second", async () => {
    // The workers started so far die first, so that the jobs below wait for the claimer.
    for (const p of cluster.procs.filter((p) => p !== api)) await killHard(p.child);
    const ids = await submit(api.url, 150);
    assert.equal(ids.length, 150);
    // A worker's fetch, in a process of its own: it claims jobs and never starts their runs.
    const claimer = spawn(
      process.execPath,
      [
        "--input-type=module",
        "-e",
        `import { PgBoss } from "pg-boss";
         const boss = new PgBoss({ connectionString: process.env.URL, max: 1, schedule: false, supervise: false });
         boss.on("error", () => {});
         await boss.start();
         const jobs = await boss.fetch("sluice-runs-flow", { batchSize: 60 });
         process.stdout.write(JSON.stringify(jobs.map((j) => j.data.runId)) + "\\n");
         setInterval(() => {}, 1000);`,
      ],
      {
        cwd: path.resolve(import.meta.dirname, "../.."),
        env: { ...process.env, URL: databaseUrl },
      },
    );
    const claimed = await new Promise<string[]>((resolve, reject) => {
      let out = "";
      claimer.stdout.on("data", (c) => {
        out += c;
        if (out.includes("\n")) resolve(JSON.parse(out) as string[]);
      });
      claimer.on("exit", (code) => reject(new Error(`claimer exited ${code}`)));
    });
    assert.equal(claimed.length, 60);
    // Under load: the other worker is busy with the rest when the claimer dies.
    await cluster.start("worker");
    const killedAt = Date.now();
    await killHard(claimer);
    await allFinished(HEARTBEAT_TIMEOUT_MS + 10_000);
    const ended = await statuses(claimed);
    for (const id of claimed) {
      const r = ended.get(id);
      assert.equal(r?.status, "SUCCESS", id);
      assert.ok(
        (r?.endTime ?? Infinity) <= killedAt + HEARTBEAT_TIMEOUT_MS + 1000,
        `${id} ended ${(r?.endTime ?? 0) - killedAt} ms after the kill`,
      );
    }
  });

  it("an API process killed while accepting runs leaves none QUEUED: each accepted run executes", async () => {
    const doomed = await cluster.start("api");
    let killed: Promise<void> | undefined;
    // Eight callers keep submitting until the process is gone, so the kill lands among requests
    // in flight (group commit answers a whole batch at once: 200 submitted together would all be
    // answered before any kill).
    const ids: string[] = [];
    let refused = 0;
    await Promise.all(
      Array.from({ length: 8 }, async () => {
        while (!killed || doomed.child.exitCode === null) {
          try {
            const r = await post(`${doomed.url}${DF}/run`, {
              elementName: "plain",
              parameter: PARAM,
            });
            if (r.status) ids.push(r.data as string);
          } catch {
            refused++; // died before answering: not accepted (it may still have been committed)
            return;
          }
          if (ids.length >= 20) killed ??= killHard(doomed.child);
        }
      }),
    );
    await killed;
    assert.ok(ids.length >= 20 && refused > 0, `accepted ${ids.length}, ${refused} unanswered`);
    await allFinished(HEARTBEAT_TIMEOUT_MS + 10_000);
    const ended = await statuses(ids);
    for (const id of ids) assert.equal(ended.get(id)?.status, "SUCCESS", id);
  });
});
