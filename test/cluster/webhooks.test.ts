import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { DF, deployAndActivate, NO_SCRIPT_FLOW } from "../helpers/flows.ts";
import { startPostgres } from "../helpers/pg.ts";
import { scopeHeaders, startServer, type TestServer } from "../helpers/server.ts";
import { type Receiver, startReceiver, verified } from "../helpers/webhook-receiver.ts";

const H = scopeHeaders();
const RUNS = 20;

/**
 * docs/webhooks.md, "Delivery, retries and durability": runs executed on two worker nodes, each
 * end delivered once, and every retry (the receiver refuses each first attempt) made by exactly
 * one of the three nodes polling the one outbox.
 */
describe("cluster: webhooks of runs executed on two worker nodes", () => {
  let rx: Receiver;
  const nodes: TestServer[] = [];
  let api: TestServer;

  before(async () => {
    rx = await startReceiver();
    const env = {
      DATABASE_URL: await (await startPostgres()).createDatabase(),
      WEBHOOK_BACKOFF_MS: "30",
      WEBHOOK_POLL_MS: "50",
    };
    api = await startServer({ ...env, SLUICE_ROLE: "api" });
    nodes.push(api);
    for (let i = 0; i < 2; i++) nodes.push(await startServer({ ...env, SLUICE_ROLE: "worker" }));
    await deployAndActivate(api, "orders", NO_SCRIPT_FLOW, {
      webhooks: [{ url: `${rx.url}/conf`, on: ["ANY"] }],
    });
  });
  after(async () => {
    for (const n of nodes) await n.close();
    await rx.close();
  });

  it("delivers exactly one verified POST per run end", async () => {
    rx.answer = (_path, attempt) => (attempt === 1 ? 500 : 200);
    const runIds = new Set<string>();
    for (let i = 0; i < RUNS; i++) {
      const r = await api.call("POST", `${DF}/run`, {
        headers: H,
        body: { elementName: "orders", parameter: { orders: [{ amount: i + 1, qty: 1 }] } },
      });
      assert.equal(r.body.status, true, r.text);
      runIds.add(r.body.data);
    }
    await rx.cond.until(() => rx.successes().size === RUNS, `${RUNS} deliveries`, 30_000);
    for (const n of nodes) await n.services.webhooks.idle();

    const secret = (await api.call("GET", `${DF}/webhook/secret`, { headers: H })).body.data.secret;
    const nowS = Math.floor(Date.now() / 1000);
    for (const x of rx.received)
      assert.ok(verified(secret, String(x.headers["sluice-signature"]), x.body, nowS));
    assert.deepEqual(new Set(rx.received.map((x) => x.json.runId)), runIds);
    assert.deepEqual([...new Set(rx.successes().values())], [1], "one success per delivery");
    assert.equal(rx.received.length, 2 * RUNS, "one refused and one accepted attempt each");

    const executedOn = new Set<string>();
    for (const id of runIds) {
      const run = await api.services.store.getRun(null, id);
      executedOn.add(run?.nodeId ?? "");
      const [d, ...more] = await api.services.webhooks.deliveriesOf(id);
      assert.equal(more.length, 0);
      assert.equal(d?.status, "DELIVERED");
      assert.deepEqual(
        d?.attempts.map((a) => a.httpStatus),
        [500, 200],
      );
    }
    const workers = new Set(nodes.slice(1).map((n) => n.services.nodeId));
    for (const n of executedOn) assert.ok(workers.has(n), `run executed on ${n}`);
  });
});
