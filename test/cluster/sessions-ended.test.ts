import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import {
  type Cluster,
  deployFlow,
  H,
  type Proc,
  post,
  QUICK_NODES,
  startCluster,
} from "../helpers/cluster.ts";
import { DF, NO_SCRIPT_FLOW } from "../helpers/flows.ts";
import type { PgRuns } from "../helpers/wait.ts";

/**
 * docs/cluster.md, "When PostgreSQL drops the connections": every session of every node is ended
 * (`pg_terminate_backend`, what a PostgreSQL restart or a failover does to them) while the nodes
 * run; without a restart, the nodes answer again, queued runs reach the worker, and a result
 * long-polled on the API node of a run the worker executes still arrives through the bridge.
 */

const PARAM = { orders: [{ amount: 2, qty: 3 }] };

describe("cluster: every node's sessions ended while they run", () => {
  let cluster: Cluster;
  let runs: PgRuns;
  let api: Proc;
  let worker: Proc;

  before(async () => {
    cluster = await startCluster({ env: QUICK_NODES, apis: 1, workers: 1 });
    [api] = cluster.apis as [Proc];
    [worker] = cluster.workers as [Proc];
    runs = await cluster.runs();
    await deployFlow(api.url, "plain", NO_SCRIPT_FLOW);
  });

  after(async () => {
    await cluster?.stop();
  });

  it("the nodes answer again, queued runs execute, long-polls are woken", async () => {
    const { rows } = await runs.db.query<{ n: number }>(
      `select count(pg_terminate_backend(pid))::int as n from pg_stat_activity
        where datname = current_database() and pid <> pg_backend_pid()`,
    );
    assert.ok((rows[0]?.n ?? 0) > 5, `sessions ended: ${rows[0]?.n}`);
    // Each answer is an envelope (an error at worst, never a hang or a dropped connection);
    // within a few tries the nodes answer as before.
    let sync: Awaited<ReturnType<typeof post>> | undefined;
    for (let i = 0; i < 20 && !sync?.status; i++) {
      sync = await post(`${api.url}${DF}/run-sync`, { elementName: "plain", parameter: PARAM });
      assert.equal(typeof sync.status, "boolean", JSON.stringify(sync));
    }
    assert.deepEqual(sync?.data, [{ amount: 2, qty: 3, total: 6 }], JSON.stringify(sync));
    // An async run goes through the queue to the worker, and its end wakes a long-poll on the API.
    const started = await post(`${api.url}${DF}/run`, { elementName: "plain", parameter: PARAM });
    assert.equal(started.status, true, JSON.stringify(started));
    const t0 = Date.now();
    const res = (await (
      await fetch(`${api.url}${DF}/run/${started.data}/result?timeout=20`, { headers: H })
    ).json()) as { status: boolean; data: unknown };
    assert.deepEqual(res.data, [{ amount: 2, qty: 3, total: 6 }], JSON.stringify(res));
    // Woken by the worker's end, not the poll's 20 s timeout (a loaded machine's slack below it).
    assert.ok(Date.now() - t0 < 12_000, `answered after ${Date.now() - t0} ms`);
    const row = (
      await runs.db.query<{ node_id: string }>("select node_id from runs where id = $1", [
        started.data,
      ])
    ).rows[0];
    assert.match(row?.node_id ?? "", new RegExp(`:${worker.child.pid}:`));
  });
});
