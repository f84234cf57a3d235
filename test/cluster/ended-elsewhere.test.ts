import assert from "node:assert/strict";
import fs from "node:fs";
import { after, before, describe, it } from "node:test";
import {
  type Cluster,
  deployFlow,
  HEARTBEAT_TIMEOUT_MS,
  type HeldRequests,
  holdRequests,
  httpCallFlow,
  type Proc,
  post,
  QUICK_NODES,
  startCluster,
} from "../helpers/cluster.ts";
import { DF } from "../helpers/flows.ts";
import { killHard } from "../helpers/process.ts";
import { type PgRuns, within } from "../helpers/wait.ts";

/**
 * docs/cluster.md, "Ends a node did not hear": a run ended by another node (a terminate, the
 * dead-node sweep) stops executing on its node even when the notification of its end never
 * reached that node: its listening connection was away (ended by the operator while the node
 * was stopped, as docs/cluster.md advises for a stopped node holding the notification queue).
 */

/** The local TCP ports of `pid`'s sockets (its connections to PostgreSQL among them). */
function localPorts(pid: number): Set<number> {
  const inodes = new Set<string>();
  for (const fd of fs.readdirSync(`/proc/${pid}/fd`)) {
    try {
      const m = /^socket:\[(\d+)\]$/.exec(fs.readlinkSync(`/proc/${pid}/fd/${fd}`));
      if (m?.[1]) inodes.add(m[1]);
    } catch {
      // closed meanwhile
    }
  }
  const ports = new Set<number>();
  for (const table of ["/proc/net/tcp", "/proc/net/tcp6"]) {
    for (const line of fs.readFileSync(table, "utf8").split("\n").slice(1)) {
      const f = line.trim().split(/\s+/);
      if (f[9] && inodes.has(f[9])) ports.add(Number.parseInt(f[1]?.split(":")[1] ?? "", 16));
    }
  }
  return ports;
}

describe("cluster: a run ended elsewhere whose end its node did not hear", () => {
  let cluster: Cluster;
  let runs: PgRuns;
  let api: Proc;
  /** The held http node's requests by name: their responses, and whether the worker gave up. */
  let hook: HeldRequests;

  const row = async (id: string) =>
    (
      await runs.db.query<{ status: string; error: string }>(
        "select status, error from runs where id = $1",
        [id],
      )
    ).rows[0];

  /** Ends every session `proc` holds with PostgreSQL (the operator's `pg_terminate_backend`). */
  const endSessionsOf = async (proc: Proc) => {
    const ports = [...localPorts(proc.child.pid ?? 0)];
    const { rows } = await runs.db.query<{ n: number }>(
      `select count(pg_terminate_backend(pid))::int as n from pg_stat_activity
        where client_port = any($1::int[]) and client_addr is not null`,
      [ports],
    );
    assert.ok((rows[0]?.n ?? 0) > 0, "the stopped node had sessions");
  };

  before(async () => {
    hook = await holdRequests();
    cluster = await startCluster({ env: QUICK_NODES, apis: 1 });
    [api] = cluster.apis as [Proc];
    runs = await cluster.runs();
    await deployFlow(api.url, "held", httpCallFlow(`${hook.url}/{{name}}`));
  });

  after(async () => {
    hook?.close();
    await cluster?.stop();
  });

  it("terminated while its node's listener was away: the node stops executing it", async () => {
    const worker = await cluster.start("worker");
    const id = await hook.run(api, "terminated");
    worker.child.kill("SIGSTOP");
    await endSessionsOf(worker);
    const t = await post(`${api.url}${DF}/run/terminate`, { runIds: [id] });
    assert.equal((t.data as Record<string, boolean>)[id], true, JSON.stringify(t));
    worker.child.kill("SIGCONT");
    // The worker stops the run: its http node's request is given up.
    await within(
      hook.held.get("terminated")?.closed ?? Promise.resolve(),
      HEARTBEAT_TIMEOUT_MS + 5000,
      "the worker gave up the terminated run's request",
    );
    assert.equal((await row(id))?.status, "CANCELED");
    await killHard(worker.child);
  });

  it("failed by another node while its node was stopped past the heartbeat timeout: the node, continued, stops executing it", async () => {
    const worker = await cluster.start("worker");
    const id = await hook.run(api, "stopped");
    worker.child.kill("SIGSTOP");
    // The operator ends the stopped node's sessions (docs/cluster.md, "Waking the lanes").
    await endSessionsOf(worker);
    const failed = await runs.until(
      () => row(id),
      (r) => r?.status !== "STARTED",
      "the stopped worker's run failed by the API node",
    );
    assert.match(failed?.error ?? "", /stopped sending heartbeats/);
    worker.child.kill("SIGCONT");
    await within(
      hook.held.get("stopped")?.closed ?? Promise.resolve(),
      HEARTBEAT_TIMEOUT_MS + 5000,
      "the continued worker gave up the failed run's request",
    );
    assert.equal((await row(id))?.status, "FAILURE");
    await killHard(worker.child);
  });
});
