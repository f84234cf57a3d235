import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import {
  type Cluster,
  deployFlow,
  HEARTBEAT_MS,
  HEARTBEAT_TIMEOUT_MS,
  type HeldRequests,
  holdRequests,
  httpCallFlow,
  type Proc,
  QUICK_NODES,
  skewed,
  startCluster,
} from "../helpers/cluster.ts";
import { killHard } from "../helpers/process.ts";
import type { PgRuns } from "../helpers/wait.ts";

/**
 * docs/cluster.md, "Clocks": a node's liveness is judged by the database's clock, so a worker
 * whose own clock is minutes off is neither taken for dead while it beats (its runs failed under
 * it), nor kept for alive for minutes once it died (its runs STARTED past the heartbeat timeout).
 */

const SKEW_MS = 5 * 60_000;

describe("cluster: a worker whose clock is minutes off", () => {
  let cluster: Cluster;
  let runs: PgRuns;
  let api: Proc;
  /** Requests the held flow's http node made, by run parameter, each answered by the test. */
  let hook: HeldRequests;

  const row = async (id: string) =>
    (
      await runs.db.query<{ status: string; node_id: string; end_time: string; error: string }>(
        "select status, node_id, end_time, error from runs where id = $1",
        [id],
      )
    ).rows[0];

  /** The API node's beats, as the database holds them, re-read on every beat. */
  const apiBeatsPast = (ms: number) => {
    const pid = `:${api.child.pid}:`;
    const beat = async () =>
      Number(
        (
          await runs.db.query<{ at: string }>(
            "select heartbeat_at::text as at from nodes where id like $1",
            [`%${pid}%`],
          )
        ).rows[0]?.at ?? 0,
      );
    return {
      beat,
      async until(since: number) {
        await runs.until(beat, (at) => at >= since + ms, "the API node beat on");
      },
    };
  };

  before(async () => {
    hook = await holdRequests();
    cluster = await startCluster({ env: QUICK_NODES, apis: 1 });
    [api] = cluster.apis as [Proc];
    runs = await cluster.runs();
    // Beats wake `runs.until` too.
    await runs.db.query(
      `create or replace trigger sluice_test_nodes_changed after insert or update on nodes
         for each statement execute function sluice_test_runs_changed()`,
    );
    await deployFlow(api.url, "held", httpCallFlow(`${hook.url}/{{name}}`));
  });

  after(async () => {
    hook?.close();
    await cluster?.stop();
  });

  it("a live worker whose clock is behind keeps its runs: no other node fails them", async () => {
    const worker = await cluster.start("worker", { NODE_OPTIONS: skewed(-SKEW_MS) });
    const id = await hook.run(api, "behind");
    assert.match((await row(id))?.node_id ?? "", new RegExp(`:${worker.child.pid}:`));
    // The API node sweeps for dead nodes on every beat: let it beat for two heartbeat timeouts.
    const beats = apiBeatsPast(2 * HEARTBEAT_TIMEOUT_MS);
    await beats.until(await beats.beat());
    assert.equal((await row(id))?.status, "STARTED", JSON.stringify(await row(id)));
    hook.held.get("behind")?.res.end('{"ok":true}');
    const ended = await runs.until(
      () => row(id),
      (r) => r?.status !== "STARTED",
      "the run ended",
    );
    assert.equal(ended?.status, "SUCCESS", JSON.stringify(ended));
    await killHard(worker.child);
  });

  it("a worker whose clock is ahead dies: its run fails within the heartbeat timeout", async () => {
    const worker = await cluster.start("worker", { NODE_OPTIONS: skewed(SKEW_MS) });
    const id = await hook.run(api, "ahead");
    assert.match((await row(id))?.node_id ?? "", new RegExp(`:${worker.child.pid}:`));
    await killHard(worker.child);
    const killedAt = Date.now();
    const ended = await runs.until(
      () => row(id),
      (r) => r?.status !== "STARTED",
      "the dead worker's run ended",
      HEARTBEAT_TIMEOUT_MS + 10_000,
    );
    assert.equal(ended?.status, "FAILURE", JSON.stringify(ended));
    assert.match(ended?.error ?? "", /stopped sending heartbeats/);
    const took = Date.now() - killedAt;
    assert.ok(
      // Before, minutes (its 5-minute lead); the slack is for a loaded machine's slow beats.
      took <= HEARTBEAT_TIMEOUT_MS + 2 * HEARTBEAT_MS + 5000,
      `failed ${took} ms after the kill`,
    );
  });
});
