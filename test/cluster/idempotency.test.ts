import assert from "node:assert/strict";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { after, before, describe, it } from "node:test";
import pg from "pg";
import { DF, NO_SCRIPT_FLOW } from "../helpers/flows.ts";
import { startPostgres } from "../helpers/pg.ts";
import { killHard, startProcess } from "../helpers/process.ts";
import { scopeHeaders } from "../helpers/server.ts";

type Proc = Awaited<ReturnType<typeof startProcess>>;
const H = { ...scopeHeaders(), "content-type": "application/json" };
const ORDERS = { orders: [{ amount: 2, qty: 3 }] };

/**
 * `Idempotency-Key` across API nodes (docs/idempotency.md, "Cluster"): the key table is in the
 * shared database, so the same key sent to two nodes, one after the other or at once, starts one
 * run, and a run-sync retried on the other node answers the first node's run.
 */
describe("cluster: one Idempotency-Key on two API processes", () => {
  let databaseUrl = "";
  let db: pg.Client;
  const dataDirs: string[] = [];
  const apis: Proc[] = [];

  const post = async (api: Proc, p: string, body: unknown, key: string) => {
    const res = await fetch(`${api.url}${DF}${p}`, {
      method: "POST",
      headers: { ...H, "idempotency-key": key },
      body: JSON.stringify(body),
    });
    const json = (await res.json()) as { status: boolean; code: number; data: unknown };
    return { ...json, runId: res.headers.get("x-run-id") };
  };
  const runsOf = async (parameter: unknown) =>
    (
      await db.query<{ id: string }>("select id from runs where run_param = $1", [
        JSON.stringify(parameter),
      ])
    ).rows.map((r) => r.id);

  before(async () => {
    databaseUrl = await (await startPostgres()).createDatabase();
    for (let i = 0; i < 2; i++) {
      const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), "sluice-idem-cluster-"));
      dataDirs.push(dataDir);
      apis.push(
        await startProcess({ DATA_DIR: dataDir, DATABASE_URL: databaseUrl, SCRIPT_PREFORK: "1" }),
      );
    }
    db = new pg.Client({ connectionString: databaseUrl });
    await db.connect();
    const [a] = apis as [Proc];
    const deploy = await fetch(`${a.url}${DF}/flow/deploy`, {
      method: "POST",
      headers: H,
      body: JSON.stringify({
        elementName: "plain",
        revisionName: "r",
        path: "/c",
        flow: NO_SCRIPT_FLOW,
        configure: {},
      }),
    });
    assert.equal(((await deploy.json()) as { status: boolean }).status, true);
    const act = await fetch(`${a.url}${DF}/flow/activate`, {
      method: "POST",
      headers: H,
      body: JSON.stringify({ elementName: "plain" }),
    });
    assert.equal(((await act.json()) as { data: string }).data, "APPROVED");
  });

  after(async () => {
    await db?.end();
    for (const p of apis) await killHard(p.child);
    for (const d of dataDirs) fs.rmSync(d, { recursive: true, force: true });
  });

  it("the same key sent to node A, then node B, answers one run", async () => {
    const [a, b] = apis as [Proc, Proc];
    const parameter = { ...ORDERS, case: "sequential" };
    const first = await post(a, "/run", { elementName: "plain", parameter }, "seq-1");
    assert.equal(first.status, true, JSON.stringify(first));
    const second = await post(b, "/run", { elementName: "plain", parameter }, "seq-1");
    assert.equal(second.data, first.data);
    assert.deepEqual(await runsOf(parameter), [first.data]);
    const other = await post(b, "/run", { elementName: "plain", parameter: ORDERS }, "seq-1");
    assert.equal(other.code, 400);
  });

  it("the same key sent to both nodes at once starts one run (POST /run and POST /run-sync)", async () => {
    const [a, b] = apis as [Proc, Proc];
    for (const endpoint of ["/run", "/run-sync"]) {
      const parameter = { ...ORDERS, case: `race ${endpoint}` };
      const body = { elementName: "plain", parameter };
      const key = `race-${endpoint}`;
      const answers = await Promise.all([
        post(a, endpoint, body, key),
        post(b, endpoint, body, key),
        post(a, endpoint, body, key),
        post(b, endpoint, body, key),
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
