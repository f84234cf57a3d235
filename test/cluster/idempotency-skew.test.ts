import assert from "node:assert/strict";
import type http from "node:http";
import { after, before, describe, it } from "node:test";
import {
  type Cluster,
  deployFlow,
  httpCallFlow,
  type Loopback,
  listenLoopback,
  type Proc,
  postTo,
  skewed,
  startCluster,
} from "../helpers/cluster.ts";
import type { PgRuns } from "../helpers/wait.ts";

/**
 * docs/idempotency.md, "Concurrent duplicates": a call that finds the key claimed and the run not
 * yet recorded waits for it, and takes the key over only once the claim is `CLAIM_TAKEOVER_MS`
 * old by the database's clock. An API node whose clock is minutes behind must not make its fresh
 * claims look old to the other nodes: the same key sent to both at once starts one run.
 */

const SKEW_MS = 5 * 60_000;

describe("cluster: one Idempotency-Key on two API nodes whose clocks disagree", () => {
  let cluster: Cluster;
  let hook: Loopback | undefined;
  const hits: http.ServerResponse[] = [];
  let firstHit: () => void = () => {};
  let apis: Proc[] = [];
  let runs: PgRuns;

  before(async () => {
    hook = await listenLoopback((_req, res) => {
      hits.push(res);
      if (hits.length === 1) firstHit();
    });
    cluster = await startCluster({ env: { SCRIPT_PREFORK: "1" } });
    apis = [
      await cluster.start("all", { NODE_OPTIONS: skewed(-SKEW_MS) }),
      await cluster.start("all"),
    ];
    runs = await cluster.runs();
    const [a] = apis as [Proc];
    await deployFlow(a.url, "held", httpCallFlow(`${hook.url}/x`));
  });

  after(async () => {
    for (const res of hits) res.destroy();
    await cluster?.stop();
    hook?.close();
  });

  it("a run-sync on the node behind, then the same key on the other within its write-behind: one run", async () => {
    const [behind, other] = apis as [Proc, Proc];
    const body = { elementName: "held", parameter: { n: 1 } };
    const executing = new Promise<void>((r) => {
      firstHit = r;
    });
    const first = postTo(behind, "/run-sync", body, "skew-1");
    // The first call's run executes (its record waits for the write-behind grace).
    await executing;
    const second = postTo(other, "/run-sync", body, "skew-1");
    // The second call looks at the key while the first run is unrecorded (its takeover, if any,
    // is at its first look); once the run is recorded it can only wait for it.
    await runs.until(
      async (d) =>
        (await d.query<{ n: number }>("select count(*)::int as n from runs")).rows[0]?.n ?? 0,
      (n) => n >= 1,
      "the first call's run recorded",
    );
    // Let both end: answer every request the flow made, however many runs made them.
    const answered = Promise.all([first, second]);
    const release = () => {
      for (const res of hits) if (!res.writableEnded) res.end('{"ok":true}');
    };
    release();
    const timer = setInterval(release, 20);
    const [a, b] = await answered.finally(() => clearInterval(timer));
    assert.equal(a.status, true, JSON.stringify(a));
    assert.equal(b.runId, a.runId, "the second call answers the first call's run");
    assert.equal(hits.length, 1, "the flow's http node was called once");
  });
});
