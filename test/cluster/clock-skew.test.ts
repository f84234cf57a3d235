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
import { type PgRuns, pgRuns } from "../helpers/wait.ts";

/**
 * docs/cluster.md, "Clocks": a node's liveness is judged by the database's clock, so a worker
 * whose own clock is minutes off is neither taken for dead while it beats (its runs failed under
 * it), nor kept for alive for minutes once it died (its runs STARTED past the heartbeat timeout).
 */

const H = { ...scopeHeaders(), "content-type": "application/json" };
const HEARTBEAT_MS = 200;
const HEARTBEAT_TIMEOUT_MS = 2000;
const SKEW_MS = 5 * 60_000;
type Proc = Awaited<ReturnType<typeof startProcess>>;

/** `NODE_OPTIONS` that move the process's wall clock by `ms` (its monotonic clock is untouched). */
const skewed = (ms: number) =>
  `--import=data:text/javascript,${encodeURIComponent(
    `const n = Date.now.bind(Date); Date.now = () => n() + (${ms});`,
  )}`;

async function post(url: string, body: unknown): Promise<{ status: boolean; data: unknown }> {
  const res = await fetch(url, { method: "POST", headers: H, body: JSON.stringify(body) });
  return (await res.json()) as { status: boolean; data: unknown };
}

describe("cluster: a worker whose clock is minutes off", () => {
  let databaseUrl = "";
  let runs: PgRuns;
  let api: Proc;
  let hook: http.Server;
  /** Requests the held flow's http node made, by run parameter, each answered on `release`. */
  const held = new Map<string, http.ServerResponse>();
  const arrived = new Map<string, () => void>();
  const dataDirs: string[] = [];
  const procs: Proc[] = [];

  const start = async (role: "serve" | "worker", extra: Record<string, string> = {}) => {
    const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), "sluice-skew-"));
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

  /** A run of the held flow, once its http node's request has reached the test (it executes). */
  const heldRun = async (name: string) => {
    const came = new Promise<void>((r) => arrived.set(name, r));
    const r = await post(`${api.url}${DF}/run`, { elementName: "held", parameter: { name } });
    assert.equal(r.status, true, JSON.stringify(r));
    await came;
    return r.data as string;
  };

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
    databaseUrl = await (await startPostgres()).createDatabase();
    hook = http.createServer((req, res) => {
      const name = decodeURIComponent(req.url?.slice(1) ?? "");
      held.set(name, res);
      arrived.get(name)?.();
    });
    await new Promise<void>((r) => hook.listen(0, "127.0.0.1", r));
    const hookUrl = `http://127.0.0.1:${(hook.address() as AddressInfo).port}`;
    api = await start("serve", { SLUICE_ROLE: "api" });
    runs = await pgRuns(databaseUrl);
    // Beats wake `runs.until` too.
    await runs.db.query(
      `create or replace trigger sluice_test_nodes_changed after insert or update on nodes
         for each statement execute function sluice_test_runs_changed()`,
    );
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
    for (const res of held.values()) res.destroy();
    for (const p of procs) await killHard(p.child);
    await runs?.close();
    hook?.close();
    for (const d of dataDirs) fs.rmSync(d, { recursive: true, force: true });
  });

  it("a live worker whose clock is behind keeps its runs: no other node fails them", async () => {
    const worker = await start("worker", { NODE_OPTIONS: skewed(-SKEW_MS) });
    const id = await heldRun("behind");
    assert.match((await row(id))?.node_id ?? "", new RegExp(`:${worker.child.pid}:`));
    // The API node sweeps for dead nodes on every beat: let it beat for two heartbeat timeouts.
    const beats = apiBeatsPast(2 * HEARTBEAT_TIMEOUT_MS);
    await beats.until(await beats.beat());
    assert.equal((await row(id))?.status, "STARTED", JSON.stringify(await row(id)));
    held.get("behind")?.end('{"ok":true}');
    const ended = await runs.until(
      () => row(id),
      (r) => r?.status !== "STARTED",
      "the run ended",
    );
    assert.equal(ended?.status, "SUCCESS", JSON.stringify(ended));
    await killHard(worker.child);
  });

  it("a worker whose clock is ahead dies: its run fails within the heartbeat timeout", async () => {
    const worker = await start("worker", { NODE_OPTIONS: skewed(SKEW_MS) });
    const id = await heldRun("ahead");
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
