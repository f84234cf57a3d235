import assert from "node:assert/strict";
import os from "node:os";
import { after, before, describe, it } from "node:test";
import pg from "pg";
import { createPgQueue } from "../../src/queue/pg-queue.ts";
import type { RunQueue } from "../../src/queue/types.ts";
import { type OpenedStore, openStore } from "../../src/store/open-store.ts";
import { startPostgres } from "../helpers/pg.ts";
import { newRun } from "../helpers/runs.ts";

const logger = { warn: () => {}, error: () => {} };
const INT4_MAX = 2 ** 31 - 1;

/**
 * Fair turns of the cluster queue (docs/run-limits.md): turns only grow, and a job's pg-boss
 * priority (int4) is minus its turn. After about two billion turns of a lane the queue must keep
 * accepting runs, in the same fair order.
 */
describe("fair turns of the cluster queue", () => {
  let url: string;
  let store: OpenedStore;
  let queue: RunQueue;
  let db: pg.Client;
  before(async () => {
    url = await (await startPostgres()).createDatabase();
    store = await openStore({ databaseUrl: url, dataDir: os.tmpdir() });
    // Never started: the jobs stay queued, in the order they would be fetched.
    queue = await createPgQueue({ connectionString: url, bound: 10_000, concurrency: 0, logger });
    db = new pg.Client({ connectionString: url });
    await db.connect();
  });
  after(async () => {
    await queue.stop();
    await store.close();
    await db.end();
  });

  const submit = async (space: string) => {
    const run = newRun({ elementType: "DPL", scope: { app: "a", space } });
    await queue.submit(run, { runId: run.id, kind: "flow", scope: run.scope }, store);
    return run.id;
  };
  /** The waiting jobs in pg-boss's fetch order. */
  const fetchOrder = async () => {
    const { rows } = await db.query<{ id: string; priority: number }>(
      `SELECT data->>'runId' AS id, priority FROM pgboss.job
        WHERE name = 'sluice-runs-flow' AND state < 'active' ORDER BY priority DESC, created_on, id`,
    );
    return rows;
  };

  it("past two billion turns, runs are still accepted in fair order", async () => {
    const busy: string[] = [];
    for (let i = 0; i < 3; i++) busy.push(await submit("busy"));
    // Two billion turns later: the lane's turns are at the top of pg-boss's priority range.
    await db.query(
      `UPDATE sluice_fair_turns SET turn = turn + $1 WHERE lane = 'sluice-runs-flow'`,
      [INT4_MAX - 4],
    );
    await db.query(
      `UPDATE pgboss.job SET priority = priority - $1 WHERE name = 'sluice-runs-flow' AND state < 'active'`,
      [INT4_MAX - 4],
    );
    for (let i = 0; i < 5; i++) busy.push(await submit("busy"));
    const other = await submit("other");
    const order = await fetchOrder();
    for (const r of order)
      assert.ok(-r.priority <= INT4_MAX && r.priority <= 0, String(r.priority));
    const ids = order.map((r) => r.id);
    assert.deepEqual(
      ids.filter((id) => busy.includes(id)),
      busy,
      "one space's jobs keep their order",
    );
    assert.ok(ids.indexOf(other) <= 1, `the other space's job is fetched at most second: ${ids}`);
  });
});
