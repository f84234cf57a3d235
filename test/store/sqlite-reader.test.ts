import assert from "node:assert/strict";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { after, before, describe, it } from "node:test";
import { parseRunsFilter } from "../../src/monitor/filter.ts";
import { monitorMethods } from "../../src/store/kysely-monitor.ts";
import { type OpenedStore, openStore } from "../../src/store/open-store.ts";
import type { Scope } from "../../src/store/types.ts";
import { newRun } from "../helpers/runs.ts";
import { seedFinishedRuns, user1Counts } from "../helpers/seed-runs.ts";

/**
 * The SQLite store answers monitoring from a thread of its own (docs/security.md, "Monitoring
 * reads"): the same answers as the service's connection, every commit made before a call seen,
 * tenants taking turns, and nothing left running once the store is closed.
 */
const A: Scope = { app: "app1", space: "space1" };
const B: Scope = { app: "app2", space: "space1" };
const RUNS = 60_000;

async function withFlow(store: OpenedStore, scope: Scope, name: string): Promise<string> {
  const folder = await store.ensureFolder(scope, "/", 0);
  const { element } = await store.deployFlow({
    scope,
    folderId: folder.id,
    name,
    revisionName: "r1",
    flow: { vertexes: [], edges: [] },
    configure: {},
    description: null,
    user: null,
    now: 0,
  });
  return element.id;
}

async function opened(): Promise<{ store: OpenedStore; dir: string; hot: string; small: string }> {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "sluice-reader-"));
  const store = await openStore({ dataDir: dir });
  const hot = await withFlow(store, A, "hot");
  const small = await withFlow(store, B, "small");
  seedFinishedRuns(path.join(dir, "sluice.db"), A, "hot", RUNS);
  return { store, dir, hot, small };
}

const search = parseRunsFilter({ pageNo: 0, pageSize: 10, quickSearch: "user1" });

describe("monitoring reads of the SQLite store", () => {
  let t: Awaited<ReturnType<typeof opened>>;
  before(async () => {
    t = await opened();
  });
  after(async () => {
    await t.store.close();
    fs.rmSync(t.dir, { recursive: true, force: true });
  });

  it("answer what the service's own connection reads", async () => {
    const own = monitorMethods(t.store.db, "sqlite");
    const queries = [
      parseRunsFilter({ pageNo: 0, pageSize: 10 }),
      parseRunsFilter({ pageNo: 3, pageSize: 25, runStatusFilter: ["FAILURE"] }),
      search,
      parseRunsFilter({
        pageNo: 1,
        pageSize: 5,
        colFilters: [{ name: "runName", value: "hot-nightly-59", op: "prefix" }],
      }),
    ];
    for (const q of queries)
      assert.deepEqual(await t.store.monitorRuns(A, t.hot, q), await own.monitorRuns(A, t.hot, q));
    assert.deepEqual(await t.store.monitorFlows(A), await own.monitorFlows(A));
    assert.deepEqual(await t.store.listFlows(null), await own.listFlows(null));
    const counts = (await t.store.monitorRuns(A, t.hot, search)).counts;
    assert.deepEqual({ SUCCESS: counts.SUCCESS, FAILURE: counts.FAILURE }, user1Counts(RUNS));
  });

  it("see a run committed just before they are called", async () => {
    for (let i = 0; i < 5; i++) {
      const run = newRun({ id: `fresh${i}`, scope: B, elementId: t.small, elementName: "small" });
      await t.store.insertRun(run);
      const page = await t.store.monitorRuns(
        B,
        t.small,
        parseRunsFilter({ pageNo: 0, pageSize: 1 }),
      );
      assert.equal(page.runs[0]?.id, run.id);
      assert.equal(page.counts.QUEUED, i + 1);
    }
  });

  it("take turns: another tenant's read goes before a tenant's queued searches", async () => {
    const order: string[] = [];
    const calls = [
      ...[0, 1, 2].map((i) =>
        t.store.monitorRuns(A, t.hot, search).then(() => order.push(`A${i}`)),
      ),
      t.store.monitorFlows(B).then(() => order.push("B")),
    ];
    await Promise.all(calls);
    assert.deepEqual(order, ["A0", "B", "A1", "A2"]);
  });
});

describe("closing the SQLite store", () => {
  it("answers the read under way, refuses those waiting and any later", async () => {
    const t = await opened();
    try {
      const first = t.store.monitorRuns(A, t.hot, search);
      const waiting = t.store.monitorRuns(A, t.hot, search);
      const closed = t.store.close();
      await assert.rejects(waiting, /the store is closed/);
      assert.equal((await first).counts.FAILURE, user1Counts(RUNS).FAILURE);
      await closed;
      await assert.rejects(t.store.monitorFlows(A), /the store is closed/);
    } finally {
      fs.rmSync(t.dir, { recursive: true, force: true });
    }
  });
});
