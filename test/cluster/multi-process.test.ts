import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import pg from "pg";
import {
  type Cluster,
  deployFlow,
  H,
  type Loopback,
  listenLoopback,
  type Proc,
  post,
  QUICK_NODES,
  startCluster,
} from "../helpers/cluster.ts";
import { DF, NO_SCRIPT_FLOW } from "../helpers/flows.ts";
import { killHard } from "../helpers/process.ts";
import { type PgRuns, pollUntil } from "../helpers/wait.ts";

describe("cluster: 2 API processes and 2 workers on one PostgreSQL", () => {
  let cluster: Cluster;
  let databaseUrl = "";
  let apis: Proc[] = [];
  let workers: Proc[] = [];
  let hook: Loopback | undefined;
  const hits = new Map<string, number>();
  /** Run records, awaited through the notifications of the runs table. */
  let runs: PgRuns;

  /** Resolves with the node ID once the run is STARTED on a node. */
  const startedOn = async (runId: string) =>
    (
      await runs.until(
        async (d) =>
          (
            await d.query<{ node_id: string | null; status: string }>(
              "select node_id, status from runs where id = $1",
              [runId],
            )
          ).rows[0],
        (r) => r?.status === "STARTED" && !!r.node_id,
        `run ${runId} STARTED on a node`,
      )
    )?.node_id ?? "";

  before(async () => {
    hook = await listenLoopback((req, res) => {
      const id = req.url?.slice(1) ?? "";
      hits.set(id, (hits.get(id) ?? 0) + 1);
      res.setHeader("content-type", "application/json");
      res.end('{"ok":true}');
    });
    const hookUrl = hook.url;

    cluster = await startCluster({
      env: { ...QUICK_NODES, HEARTBEAT_MS: "300" },
      apis: 2,
      workers: 2,
    });
    ({ databaseUrl, apis, workers } = cluster);
    runs = await cluster.runs();
    const api = apis[0]?.url ?? "";
    const flows: [string, unknown][] = [
      ["plain", NO_SCRIPT_FLOW],
      [
        "counted",
        {
          vertexes: [
            { id: "in", type: "input" },
            {
              id: "py",
              type: "script",
              config: { code: "def main(p):\n    return {'id': p['id']}\n" },
            },
            { id: "call", type: "http", config: { method: "POST", url: `${hookUrl}/{{id}}` } },
          ],
          edges: [
            { source: "in", target: "py" },
            { source: "py", target: "call" },
          ],
        },
      ],
      [
        "sleeper",
        {
          vertexes: [
            { id: "in", type: "input" },
            {
              id: "py",
              type: "script",
              config: { code: "import time\ndef main(p):\n    time.sleep(120)\n" },
            },
          ],
          edges: [{ source: "in", target: "py" }],
        },
      ],
    ];
    for (const [name, flow] of flows) await deployFlow(api, name, flow);
  });

  after(async () => {
    await cluster?.stop();
    hook?.close();
  });

  it("runs submitted to both APIs all succeed, each executed once by a worker", async () => {
    const ids: string[] = [];
    for (let i = 0; i < 40; i++) {
      const api = apis[i % 2]?.url ?? "";
      const r = await post(`${api}${DF}/run`, {
        elementName: "counted",
        parameter: { id: `job${i}` },
      });
      assert.equal(r.status, true, JSON.stringify(r));
      ids.push(r.data as string);
    }
    for (const [i, id] of ids.entries()) {
      // Ask the other API than the one that took the run: completion crosses nodes by NOTIFY.
      const api = apis[(i + 1) % 2]?.url ?? "";
      const res = (await (
        await fetch(`${api}${DF}/run/${id}/result?timeout=30`, { headers: H })
      ).json()) as { status: boolean };
      assert.equal(res.status, true, `run ${id}: ${JSON.stringify(res)}`);
    }
    for (let i = 0; i < 40; i++)
      assert.equal(hits.get(`job${i}`), 1, `job${i} executed exactly once`);
    const db = new pg.Client({ connectionString: databaseUrl });
    await db.connect();
    const { rows } = await db.query<{ node_id: string }>(
      "select distinct node_id from runs where id = any($1)",
      [ids],
    );
    await db.end();
    assert.ok(
      rows.every((r) => workers.some((w) => r.node_id.includes(`:${w.child.pid}:`))),
      "queued runs ran on workers",
    );
  });

  it("run-sync answers through an API node", async () => {
    const r = await post(`${apis[1]?.url}${DF}/run-sync`, {
      elementName: "plain",
      parameter: { orders: [{ amount: 1, qty: 2 }] },
    });
    assert.deepEqual(r.data, [{ amount: 1, qty: 2, total: 2 }]);
  });

  it("a worker killed mid-run leaves its run FAILURE after the heartbeat timeout; nothing else is lost", async () => {
    const api = apis[0]?.url ?? "";
    const sleeping = (await post(`${api}${DF}/run`, { elementName: "sleeper", parameter: {} }))
      .data as string;
    const nodeId = await startedOn(sleeping);
    const victim = workers.find((w) => nodeId.includes(`:${w.child.pid}:`));
    assert.ok(victim, `the sleeper runs on a worker (${nodeId})`);
    await killHard(victim.child);

    const more: string[] = [];
    for (let i = 0; i < 10; i++)
      more.push(
        (await post(`${api}${DF}/run`, { elementName: "counted", parameter: { id: `after${i}` } }))
          .data as string,
      );

    const res = (await (
      await fetch(`${api}${DF}/run/${sleeping}/result?timeout=20`, { headers: H })
    ).json()) as { code: number; message: string };
    assert.equal(res.code, 28020004);
    assert.match(res.message, /heartbeats/);
    for (const id of more) {
      const r = (await (
        await fetch(`${api}${DF}/run/${id}/result?timeout=30`, { headers: H })
      ).json()) as { status: boolean };
      assert.equal(r.status, true, `run ${id} after the kill`);
    }
    for (let i = 0; i < 10; i++) assert.equal(hits.get(`after${i}`), 1);
  });

  it("a cron trigger fires once per tick across the four processes", async () => {
    const api = apis[0]?.url ?? "";
    const flow = {
      vertexes: [
        { id: "in", type: "input" },
        { id: "out", type: "output" },
      ],
      edges: [{ source: "in", target: "out" }],
    };
    const configure = {
      triggers: [
        { type: "cron", name: "every-second", crontab: "* * * * * *", parameter: { from: "cron" } },
      ],
    };
    assert.equal(
      (
        await post(`${api}${DF}/flow/deploy`, {
          elementName: "ticker",
          revisionName: "r",
          path: "/c",
          flow,
          configure,
        })
      ).status,
      true,
    );
    const t0 = Date.now();
    assert.equal(
      (await post(`${api}${DF}/flow/activate`, { elementName: "ticker" })).data,
      "APPROVED",
    );
    // Four ticks fired, however long the machine takes for them.
    await runs.until(
      async (d) =>
        (
          await d.query<{ n: number }>(
            "select count(*)::int as n from runs where element_name = 'ticker' and trigger_type = 'SCHEDULED'",
          )
        ).rows[0]?.n ?? 0,
      (n) => n >= 4,
      "four scheduled runs of the ticker",
    );
    await post(`${api}${DF}/flow/deactivate`, { elementName: "ticker" });
    const elapsedS = (Date.now() - t0) / 1000;
    // Every tick fired so far has ended: a second run of one tick would be among them.
    await runs.until(
      async (d) =>
        (
          await d.query<{ n: number }>(
            "select count(*)::int as n from runs where element_name = 'ticker' and status in ('QUEUED', 'STARTED')",
          )
        ).rows[0]?.n,
      (n) => n === 0,
      "every scheduled run of the ticker ended",
    );
    const { rows } = await runs.db.query<{ create_time: string; run_param: string }>(
      "select create_time, run_param from runs where element_name = 'ticker' and trigger_type = 'SCHEDULED' order by create_time",
    );
    // Four schedulers watch this flow; one run per tick means at most one run per elapsed second.
    assert.ok(rows.length >= 2, `fired ${rows.length} times`);
    assert.ok(
      rows.length <= Math.ceil(elapsedS) + 1,
      `${rows.length} runs in ${elapsedS.toFixed(1)} s: a tick fired twice`,
    );
    assert.ok(rows.every((r) => r.run_param === '{"from":"cron"}'));
  });

  it("terminate through one API reaches the run on whichever worker executes it", async () => {
    const sleeping = (
      await post(`${apis[0]?.url}${DF}/run`, { elementName: "sleeper", parameter: {} })
    ).data as string;
    // Once a worker executes it (its python process is sleeping), terminate through the other API.
    await startedOn(sleeping);
    const t = await post(`${apis[1]?.url}${DF}/run/terminate`, { runIds: [sleeping] });
    assert.equal((t.data as Record<string, boolean>)[sleeping], true, JSON.stringify(t));
    const res = (await (
      await fetch(`${apis[0]?.url}${DF}/run/${sleeping}/result`, { headers: H })
    ).json()) as { code: number };
    assert.equal(res.code, 28020005);
    // The worker kills the sleeping process: soon no python process of that run is left. It is
    // another process tree's, and its end is announced to nobody: read by the shared poll.
    const { execSync } = await import("node:child_process");
    await pollUntil(
      () =>
        execSync("ps -eo args")
          .toString()
          .split("\n")
          .filter((l) => l.includes("time.sleep(120)")),
      (left) => left.length === 0,
      "the sleeping python process is gone",
      { ms: 5000 },
    );
  });
});
