import assert from "node:assert/strict";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { after, before, describe, it } from "node:test";
import { DF, NO_SCRIPT_FLOW } from "../helpers/flows.ts";
import { startPostgres } from "../helpers/pg.ts";
import { killHard, startProcess } from "../helpers/process.ts";
import { scopeHeaders } from "../helpers/server.ts";
import { type PgRuns, pgRuns } from "../helpers/wait.ts";

/**
 * docs/cluster.md, "When PostgreSQL drops the connections": every session of every node is ended
 * (`pg_terminate_backend`, what a PostgreSQL restart or a failover does to them) while the nodes
 * run; without a restart, the nodes answer again, queued runs reach the worker, and a result
 * long-polled on the API node of a run the worker executes still arrives through the bridge.
 */

const H = { ...scopeHeaders(), "content-type": "application/json" };
const PARAM = { orders: [{ amount: 2, qty: 3 }] };
type Proc = Awaited<ReturnType<typeof startProcess>>;

async function post(
  url: string,
  body: unknown,
): Promise<{ status: boolean; code: number; data: unknown; message: string }> {
  const res = await fetch(url, { method: "POST", headers: H, body: JSON.stringify(body) });
  return (await res.json()) as { status: boolean; code: number; data: unknown; message: string };
}

describe("cluster: every node's sessions ended while they run", () => {
  let databaseUrl = "";
  let runs: PgRuns;
  let api: Proc;
  let worker: Proc;
  const dataDirs: string[] = [];

  const start = async (role: "serve" | "worker", extra: Record<string, string> = {}) => {
    const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), "sluice-sessions-"));
    dataDirs.push(dataDir);
    return startProcess(
      {
        DATA_DIR: dataDir,
        DATABASE_URL: databaseUrl,
        HEARTBEAT_MS: "200",
        HEARTBEAT_TIMEOUT_MS: "2000",
        SCRIPT_PREFORK: "1",
        ...extra,
      },
      role,
    );
  };

  before(async () => {
    databaseUrl = await (await startPostgres()).createDatabase();
    api = await start("serve", { SLUICE_ROLE: "api" });
    worker = await start("worker");
    runs = await pgRuns(databaseUrl);
    const d = await post(`${api.url}${DF}/flow/deploy`, {
      elementName: "plain",
      revisionName: "r",
      path: "/c",
      flow: NO_SCRIPT_FLOW,
      configure: {},
    });
    assert.equal(d.status, true, JSON.stringify(d));
    assert.equal(
      (await post(`${api.url}${DF}/flow/activate`, { elementName: "plain" })).status,
      true,
    );
  });

  after(async () => {
    await killHard(api.child);
    await killHard(worker.child);
    await runs?.close();
    for (const d of dataDirs) fs.rmSync(d, { recursive: true, force: true });
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
