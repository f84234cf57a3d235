import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import pg from "pg";
import { type Cluster, deployFlow, type Proc, postTo, startCluster } from "../helpers/cluster.ts";
import { NO_SCRIPT_FLOW } from "../helpers/flows.ts";

const ORDERS = { orders: [{ amount: 2, qty: 3 }] };

/**
 * `Idempotency-Key` across API nodes (docs/idempotency.md, "Cluster"): the key table is in the
 * shared database, so the same key sent to two nodes, one after the other or at once, starts one
 * run, and a run-sync retried on the other node answers the first node's run.
 */
describe("cluster: one Idempotency-Key on two API processes", () => {
  let cluster: Cluster;
  let db: pg.Client;
  let apis: Proc[] = [];

  const runsOf = async (parameter: unknown) =>
    (
      await db.query<{ id: string }>("select id from runs where run_param = $1", [
        JSON.stringify(parameter),
      ])
    ).rows.map((r) => r.id);

  before(async () => {
    cluster = await startCluster({ env: { SCRIPT_PREFORK: "1" } });
    apis = [await cluster.start("all"), await cluster.start("all")];
    db = new pg.Client({ connectionString: cluster.databaseUrl });
    await db.connect();
    const [a] = apis as [Proc];
    await deployFlow(a.url, "plain", NO_SCRIPT_FLOW);
  });

  after(async () => {
    await db?.end();
    await cluster?.stop();
  });

  it("the same key sent to node A, then node B, answers one run", async () => {
    const [a, b] = apis as [Proc, Proc];
    const parameter = { ...ORDERS, case: "sequential" };
    const first = await postTo(a, "/run", { elementName: "plain", parameter }, "seq-1");
    assert.equal(first.status, true, JSON.stringify(first));
    const second = await postTo(b, "/run", { elementName: "plain", parameter }, "seq-1");
    assert.equal(second.data, first.data);
    assert.deepEqual(await runsOf(parameter), [first.data]);
    const other = await postTo(b, "/run", { elementName: "plain", parameter: ORDERS }, "seq-1");
    assert.equal(other.code, 400);
  });

  it("the same key sent to both nodes at once starts one run (POST /run and POST /run-sync)", async () => {
    const [a, b] = apis as [Proc, Proc];
    for (const endpoint of ["/run", "/run-sync"]) {
      const parameter = { ...ORDERS, case: `race ${endpoint}` };
      const body = { elementName: "plain", parameter };
      const key = `race-${endpoint}`;
      const answers = await Promise.all([
        postTo(a, endpoint, body, key),
        postTo(b, endpoint, body, key),
        postTo(a, endpoint, body, key),
        postTo(b, endpoint, body, key),
      ]);
      for (const r of answers) assert.equal(r.status, true, JSON.stringify(r));
      const ids = new Set(answers.map((r) => r.runId));
      assert.equal(ids.size, 1, `one run ID: ${[...ids].join(", ")}`);
      if (endpoint === "/run-sync")
        for (const r of answers) assert.deepEqual(r.data, [{ amount: 2, qty: 3, total: 6 }]);
      assert.deepEqual(await runsOf(parameter), [...ids]);
    }
  });
});
