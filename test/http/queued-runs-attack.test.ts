import assert from "node:assert/strict";
import http from "node:http";
import type { AddressInfo } from "node:net";
import { afterEach, describe, it } from "node:test";
import { DF, deployAndActivate, NO_SCRIPT_FLOW } from "../helpers/flows.ts";
import {
  type Reply,
  scopeHeaders,
  startServer,
  TEST_MODE,
  type TestServer,
} from "../helpers/server.ts";
import { condition } from "../helpers/wait.ts";

/**
 * The run queue is shared by every tenant (docs/run-limits.md, "Queued runs"). Written as an
 * attacker would: runs that wait, sent until the service refuses them. Before, one app could
 * hold the whole `LIMIT_QUEUED_RUNS` (every other tenant's runs were refused with 429), and the
 * runs of a flow with `maxConcurrentRuns` that waited for a slot were not counted at all.
 */
const ATTACKER = { app: "evil", space: "s1", user: "mallory" } as const;
const BOUND = 20;

/** An HTTP target that answers nothing until closed: a run calling it stays STARTED. */
async function startSink(): Promise<{
  url: string;
  arrived: () => number;
  /** Resolves once `n` requests have arrived (runs executing). */
  until(n: number): Promise<void>;
  close(): Promise<void>;
}> {
  const arrivals = condition();
  let arrived = 0;
  const held: http.ServerResponse[] = [];
  const server = http.createServer((req, res) => {
    req.resume();
    held.push(res);
    arrived++;
    arrivals.changed();
  });
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/hold`,
    arrived: () => arrived,
    until: (n) => arrivals.until(() => arrived >= n, `${n} runs executing`, 30_000),
    close: () =>
      new Promise<void>((resolve) => {
        for (const res of held.splice(0)) res.end("{}");
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

const slowFlow = (url: string) => ({
  vertexes: [
    { id: "in", type: "input" },
    { id: "wait", type: "http", config: { url } },
  ],
  edges: [{ source: "in", target: "wait" }],
});

/** Sends runs of the flow until one is refused; answers how many were accepted and the refusal. */
async function flood(
  server: TestServer,
  name: string,
  most: number,
  as: { app: string; space: string; user: string } = ATTACKER,
) {
  const headers = scopeHeaders(as);
  for (let accepted = 0; accepted < most; accepted++) {
    const r: Reply = await server.call("POST", `${DF}/run`, {
      headers,
      body: { elementName: name, parameter: { pad: "x".repeat(1000) } },
    });
    if (r.body.status !== true) return { accepted, refusal: r.body };
  }
  return { accepted: most, refusal: null };
}

describe("one app's waiting runs against the shared run queue", () => {
  let server: TestServer | undefined;
  let sink: Awaited<ReturnType<typeof startSink>> | undefined;
  afterEach(async () => {
    // The sink first: the service's stop waits for the runs it holds.
    await sink?.close();
    await server?.close();
  });

  it("an app that fills the queue with runs that wait leaves room for another app's runs", async () => {
    sink = await startSink();
    // Two runs execute at once; the rest of the attacker's wait in the queue.
    server = await startServer({ LIMIT_QUEUED_RUNS: String(BOUND), FLOW_CONCURRENCY: "2" });
    await deployAndActivate(server, "slow", slowFlow(sink.url), {}, scopeHeaders(ATTACKER));
    await deployAndActivate(server, "plain", NO_SCRIPT_FLOW);
    // Two runs executing (in a cluster, once a worker has fetched them), then the flood.
    assert.equal((await flood(server, "slow", 2)).accepted, 2);
    await sink.until(2);
    const { accepted, refusal } = await flood(server, "slow", 5 * BOUND);
    assert.ok(refusal, `all ${accepted} runs accepted`);
    assert.equal(refusal.code, 429);
    assert.match(refusal.message, /LIMIT_QUEUED_RUNS_PER_APP/);
    assert.equal(accepted, BOUND / 2, `${accepted} runs waiting`);
    // Another app's runs are still accepted: one that waits (the slots are the attacker's), and
    // run-syncs, which wait behind nothing of the attacker's.
    await otherAppWaits(server);
    for (let i = 0; i < 3; i++) {
      const r: Reply = await server.call("POST", `${DF}/run-sync`, {
        headers: scopeHeaders(),
        body: { elementName: "plain", parameter: { orders: [{ amount: 1, qty: 2 }] } },
      });
      assert.equal(r.body.status, true, r.text);
    }
  });

  it("two apps that fill their shares leave the last places to a third app's runs", async () => {
    sink = await startSink();
    server = await startServer({ LIMIT_QUEUED_RUNS: String(BOUND), FLOW_CONCURRENCY: "2" });
    const second = { app: "evil2", space: "s1", user: "trudy" };
    await deployAndActivate(server, "slow", slowFlow(sink.url), {}, scopeHeaders(ATTACKER));
    await deployAndActivate(server, "slow", slowFlow(sink.url), {}, scopeHeaders(second));
    await deployAndActivate(server, "plain", NO_SCRIPT_FLOW);
    assert.equal((await flood(server, "slow", 2)).accepted, 2);
    await sink.until(2);
    assert.equal((await flood(server, "slow", 5 * BOUND)).accepted, BOUND / 2);
    // The second app's share is as large, but the last tenth of the places (the default
    // LIMIT_QUEUED_RUNS_RESERVE) is kept for apps with few runs waiting.
    const { accepted, refusal } = await flood(server, "slow", 5 * BOUND, second);
    assert.equal(refusal?.code, 429);
    assert.match(refusal?.message ?? "", /LIMIT_QUEUED_RUNS_RESERVE/);
    assert.equal(accepted, BOUND / 2 - BOUND / 10, `${accepted} runs of the second app waiting`);
    await otherAppWaits(server);
  });

  it("the runs of a limited flow waiting for its slot count against the app's share", async () => {
    sink = await startSink();
    server = await startServer({ LIMIT_QUEUED_RUNS: String(BOUND) });
    await deployAndActivate(
      server,
      "limited",
      slowFlow(sink.url),
      { maxConcurrentRuns: 1 },
      scopeHeaders(ATTACKER),
    );
    assert.equal((await flood(server, "limited", 1)).accepted, 1);
    await sink.until(1);
    const { accepted, refusal } = await flood(server, "limited", 5 * BOUND);
    assert.ok(refusal, `all ${accepted} runs accepted: none of the waiting ones was counted`);
    assert.equal(refusal.code, 429);
    assert.equal(accepted, BOUND / 2, `${accepted} runs waiting`);
    assert.equal(sink.arrived(), 1, "one run executes, the limit holds");
  });
});

/** Another app's run that has to wait (every slot is taken): accepted, QUEUED. */
async function otherAppWaits(server: TestServer): Promise<void> {
  const r: Reply = await server.call("POST", `${DF}/run`, {
    headers: scopeHeaders(),
    body: { elementName: "plain", parameter: { orders: [{ amount: 1, qty: 2 }] } },
  });
  assert.equal(r.body.status, true, r.text);
}

// Two API nodes on one database exist only in cluster mode.
if (TEST_MODE === "cluster")
  describe("one app's waiting runs sent to two API nodes", () => {
    let nodes: TestServer[] = [];
    let sink: Awaited<ReturnType<typeof startSink>> | undefined;
    afterEach(async () => {
      await sink?.close();
      for (const n of nodes) await n.close();
      nodes = [];
    });

    it("the app's share holds across both nodes, and another app's waiting run is accepted", async () => {
      sink = await startSink();
      const env = { LIMIT_QUEUED_RUNS: String(BOUND), FLOW_CONCURRENCY: "1" };
      const first = await startServer(env);
      const second = await startServer({ ...env, DATABASE_URL: first.config.databaseUrl ?? "" });
      nodes = [first, second];
      await deployAndActivate(first, "slow", slowFlow(sink.url), {}, scopeHeaders(ATTACKER));
      await deployAndActivate(first, "plain", NO_SCRIPT_FLOW);
      // One run executing on each node's slot, then the flood, sent to both in turn.
      assert.equal((await flood(first, "slow", 2)).accepted, 2);
      await sink.until(2);
      let accepted = 0;
      for (let i = 0; i < 3 * BOUND; i++) {
        const r: Reply = await (nodes[i % 2] as TestServer).call("POST", `${DF}/run`, {
          headers: scopeHeaders(ATTACKER),
          body: { elementName: "slow", parameter: { pad: "x".repeat(1000) } },
        });
        if (r.body.status === true) accepted++;
        else assert.equal(r.body.code, 429, r.text);
      }
      assert.ok(accepted <= BOUND / 2 + 1, `${accepted} runs of one app waiting`);
      await otherAppWaits(first);
      await otherAppWaits(second);
    });
  });
