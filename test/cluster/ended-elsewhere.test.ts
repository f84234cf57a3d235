import assert from "node:assert/strict";
import fs from "node:fs";
import http from "node:http";
import type { AddressInfo } from "node:net";
import os from "node:os";
import path from "node:path";
import { after, before, describe, it } from "node:test";
import { DF } from "../helpers/flows.ts";
import { startPostgres } from "../helpers/pg.ts";
import { killHard, startProcess } from "../helpers/process.ts";
import { scopeHeaders } from "../helpers/server.ts";
import { type PgRuns, pgRuns, within } from "../helpers/wait.ts";

/**
 * docs/cluster.md, "Ends a node did not hear": a run ended by another node (a terminate, the
 * dead-node sweep) stops executing on its node even when the notification of its end never
 * reached that node: its listening connection was away (ended by the operator while the node
 * was stopped, as docs/cluster.md advises for a stopped node holding the notification queue).
 */

const H = { ...scopeHeaders(), "content-type": "application/json" };
const HEARTBEAT_MS = 200;
const HEARTBEAT_TIMEOUT_MS = 2000;
type Proc = Awaited<ReturnType<typeof startProcess>>;

async function post(url: string, body: unknown): Promise<{ status: boolean; data: unknown }> {
  const res = await fetch(url, { method: "POST", headers: H, body: JSON.stringify(body) });
  return (await res.json()) as { status: boolean; data: unknown };
}

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
  let databaseUrl = "";
  let runs: PgRuns;
  let api: Proc;
  let hook: http.Server;
  /** The held http node's requests by name: their responses, and whether the worker gave up. */
  const held = new Map<string, { res: http.ServerResponse; closed: Promise<void> }>();
  const arrived = new Map<string, () => void>();
  const dataDirs: string[] = [];
  const procs: Proc[] = [];

  const start = async (role: "serve" | "worker", extra: Record<string, string> = {}) => {
    const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), "sluice-elsewhere-"));
    dataDirs.push(dataDir);
    const p = await startProcess(
      {
        DATA_DIR: dataDir,
        DATABASE_URL: databaseUrl,
        HEARTBEAT_MS: String(HEARTBEAT_MS),
        HEARTBEAT_TIMEOUT_MS: String(HEARTBEAT_TIMEOUT_MS),
        SCRIPT_PREFORK: "1",
        ...extra,
      },
      role,
    );
    procs.push(p);
    return p;
  };

  /** A run of the held flow, once its http node's request has reached the test. */
  const heldRun = async (name: string) => {
    const came = new Promise<void>((r) => arrived.set(name, r));
    const r = await post(`${api.url}${DF}/run`, { elementName: "held", parameter: { name } });
    assert.equal(r.status, true, JSON.stringify(r));
    await came;
    return r.data as string;
  };

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
    databaseUrl = await (await startPostgres()).createDatabase();
    hook = http.createServer((req, res) => {
      const name = decodeURIComponent(req.url?.slice(1) ?? "");
      const closed = new Promise<void>((r) => res.once("close", () => r()));
      held.set(name, { res, closed });
      arrived.get(name)?.();
    });
    await new Promise<void>((r) => hook.listen(0, "127.0.0.1", r));
    const hookUrl = `http://127.0.0.1:${(hook.address() as AddressInfo).port}`;
    api = await start("serve", { SLUICE_ROLE: "api" });
    runs = await pgRuns(databaseUrl);
    const flow = {
      vertexes: [
        { id: "in", type: "input" },
        { id: "call", type: "http", config: { method: "GET", url: `${hookUrl}/{{name}}` } },
      ],
      edges: [{ source: "in", target: "call" }],
    };
    const d = await post(`${api.url}${DF}/flow/deploy`, {
      elementName: "held",
      revisionName: "r",
      path: "/c",
      flow,
      configure: {},
    });
    assert.equal(d.status, true, JSON.stringify(d));
    assert.equal(
      (await post(`${api.url}${DF}/flow/activate`, { elementName: "held" })).status,
      true,
    );
  });

  after(async () => {
    for (const h of held.values()) h.res.destroy();
    for (const p of procs) {
      p.child.kill("SIGCONT");
      await killHard(p.child);
    }
    await runs?.close();
    hook?.close();
    for (const d of dataDirs) fs.rmSync(d, { recursive: true, force: true });
  });

  it("terminated while its node's listener was away: the node stops executing it", async () => {
    const worker = await start("worker");
    const id = await heldRun("terminated");
    worker.child.kill("SIGSTOP");
    await endSessionsOf(worker);
    const t = await post(`${api.url}${DF}/run/terminate`, { runIds: [id] });
    assert.equal((t.data as Record<string, boolean>)[id], true, JSON.stringify(t));
    worker.child.kill("SIGCONT");
    // The worker stops the run: its http node's request is given up.
    await within(
      held.get("terminated")?.closed ?? Promise.resolve(),
      HEARTBEAT_TIMEOUT_MS + 5000,
      "the worker gave up the terminated run's request",
    );
    assert.equal((await row(id))?.status, "CANCELED");
    await killHard(worker.child);
  });

  it("failed by another node while its node was stopped past the heartbeat timeout: the node, continued, stops executing it", async () => {
    const worker = await start("worker");
    const id = await heldRun("stopped");
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
      held.get("stopped")?.closed ?? Promise.resolve(),
      HEARTBEAT_TIMEOUT_MS + 5000,
      "the continued worker gave up the failed run's request",
    );
    assert.equal((await row(id))?.status, "FAILURE");
    await killHard(worker.child);
  });
});
