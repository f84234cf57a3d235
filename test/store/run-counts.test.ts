import assert from "node:assert/strict";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { after, before, describe, it } from "node:test";
import { sql } from "kysely";
import { parseRunsFilter } from "../../src/monitor/filter.ts";
import { type OpenedStore, openStore } from "../../src/store/open-store.ts";
import type { NewRun, Scope, TriggerType } from "../../src/store/types.ts";
import { startPostgres } from "../helpers/pg.ts";
import { newRun } from "../helpers/runs.ts";

/**
 * The run counters of migration 006 (docs/monitoring.md) always equal a count of the finished
 * runs themselves, through every Store write: insert, start, end, cancel, delete, concurrent
 * writers.
 */

const SCOPE: Scope = { app: "app1", space: "space1" };
const OTHER: Scope = { app: "app1", space: "space2" };
const TRIGGERS: TriggerType[] = ["ASYNC", "SYNC", "SCHEDULED", "API"];

let seq = 0;
function flowRun(scope: Scope, elementId: string, over: Partial<NewRun> = {}): NewRun {
  seq++;
  return newRun({
    id: `run${String(seq).padStart(6, "0")}`,
    scope,
    elementId,
    elementType: "DPL",
    elementName: "flow",
    version: "1",
    triggerType: TRIGGERS[seq % TRIGGERS.length] as TriggerType,
    createTime: 1_000 + seq,
    ...over,
  });
}

type CountRow = {
  app: string;
  space: string;
  element_id: number;
  trigger_type: string;
  status: string;
  n: number;
};

/** Counter rows and the finished runs counted from `runs`, both without zero rows, sorted alike. */
async function bothCounts(store: OpenedStore): Promise<{ kept: string[]; counted: string[] }> {
  const line = (r: CountRow) =>
    `${r.app}/${r.space}/${r.element_id}/${r.trigger_type}/${r.status}=${Number(r.n)}`;
  const kept = await sql<CountRow>`select app, space, element_id, trigger_type, status, n
    from run_status_counts where n <> 0`.execute(store.db);
  const counted =
    await sql<CountRow>`select app, space, element_id, trigger_type, status, count(*) as n
    from runs where status in ('SUCCESS', 'FAILURE', 'CANCELED')
    group by app, space, element_id, trigger_type, status`.execute(store.db);
  return { kept: kept.rows.map(line).sort(), counted: counted.rows.map(line).sort() };
}

async function assertExact(store: OpenedStore): Promise<void> {
  const { kept, counted } = await bothCounts(store);
  assert.ok(counted.length > 0, "the test wrote runs");
  assert.deepEqual(kept, counted);
}

for (const dialect of ["sqlite", "postgres"] as const) {
  describe(`run counters (${dialect})`, () => {
    let store: OpenedStore;
    let dataDir: string;

    before(async () => {
      dataDir = fs.mkdtempSync(path.join(os.tmpdir(), "sluice-counts-"));
      const databaseUrl =
        dialect === "postgres" ? await (await startPostgres()).createDatabase() : undefined;
      store = await openStore({ databaseUrl, dataDir });
    });

    after(async () => {
      await store?.close();
      fs.rmSync(dataDir, { recursive: true, force: true });
    });

    it("follow insert, start, end, cancel and delete, one run at a time", async () => {
      const a = flowRun(SCOPE, "1");
      const b = flowRun(SCOPE, "1", { triggerType: "SYNC" });
      const c = flowRun(OTHER, "2");
      const d = flowRun(SCOPE, "1", { status: "STARTED", startTime: 5 });
      for (const r of [a, b, c, d]) await store.insertRun(r);
      await store.insertRun(flowRun(SCOPE, "1", { startTime: 5 }), {
        status: "SUCCESS",
        endTime: 9,
        summary: null,
      });
      await assertExact(store);
      assert.equal((await store.startRun(a.id, 10, null))?.status, "STARTED");
      assert.equal(
        await store.startRun(a.id, 11, null),
        undefined,
        "a second start changes nothing",
      );
      await assertExact(store);
      await store.endRun(a.id, { status: "FAILURE", endTime: 20, summary: "x" });
      await store.endRun(b.id, { status: "CANCELED", endTime: 20, summary: null });
      assert.equal(
        await store.endRun(b.id, { status: "SUCCESS", endTime: 21, summary: null }),
        false,
      );
      await assertExact(store);
      const deleted = await store.deleteRuns(SCOPE, [a.id, b.id, d.id]);
      assert.deepEqual([...deleted].sort(), [a.id, b.id].sort(), "an unfinished run is kept");
      await assertExact(store);

      const page = await store.monitorRuns(
        SCOPE,
        "1",
        parseRunsFilter({ pageNo: 0, pageSize: 20 }),
      );
      assert.deepEqual(page.counts, { QUEUED: 0, STARTED: 1, SUCCESS: 1, FAILURE: 0, CANCELED: 0 });
      assert.equal(page.totalCount, 2);
    });

    it("follow the end of a run STARTED here that nothing executes, counted once", async () => {
      const lost = flowRun(SCOPE, "4", { status: "STARTED", startTime: 5, nodeId: "n-lost" });
      await store.insertRun(lost);
      const end = { status: "FAILURE", endTime: 30, summary: "lost", error: "lost" } as const;
      assert.equal(await store.endStartedOn(lost.id, "n-lost", end), true);
      assert.equal(await store.endStartedOn(lost.id, "n-lost", end), false);
      await assertExact(store);
    });

    it("follow script tasks and runs inserted finished", async () => {
      const runs = Array.from({ length: 12 }, (_, i) =>
        flowRun(SCOPE, "3", { elementType: i % 2 ? "PY" : "DPL", startTime: 7 }),
      );
      for (const [i, r] of runs.entries()) {
        const end =
          i % 3 === 0 ? ({ status: "FAILURE", endTime: 9, summary: null } as const) : undefined;
        await store.insertRun(r, end);
      }
      await assertExact(store);
      for (const r of runs)
        await store.endRun(r.id, { status: "SUCCESS", endTime: 10, summary: null });
      await assertExact(store);
      await store.deleteRuns(
        null,
        runs.slice(0, 5).map((r) => r.id),
      );
      await assertExact(store);
    });

    it("stay exact under concurrent writers", async () => {
      const runs = Array.from({ length: 60 }, (_, i) => flowRun(i % 2 ? SCOPE : OTHER, "4"));
      await Promise.all(runs.map((r) => store.insertRun(r)));
      await Promise.all(runs.map((r, i) => store.startRun(r.id, 50 + i, null)));
      // Two ends race for every run: only one may move it, and only once.
      const ends = runs.flatMap((r) => [
        store.endRun(r.id, { status: "SUCCESS", endTime: 100, summary: null }),
        store.endRun(r.id, { status: "CANCELED", endTime: 100, summary: null }),
      ]);
      const moved = (await Promise.all(ends)).filter(Boolean).length;
      assert.equal(moved, runs.length);
      await assertExact(store);
      await Promise.all([
        ...runs.map((r) => store.deleteRuns(r.scope, [r.id])),
        ...Array.from({ length: 20 }, () => store.insertRun(flowRun(SCOPE, "4"))),
      ] as Promise<unknown>[]);
      await assertExact(store);
      const page = await store.monitorRuns(
        SCOPE,
        "4",
        parseRunsFilter({ pageNo: 0, pageSize: 20, triggerFilter: ["SYNC"] }),
      );
      const listed = await store.monitorRuns(
        SCOPE,
        "4",
        parseRunsFilter({ pageNo: 0, pageSize: 20, triggerFilter: ["SYNC"], versionFilter: ["1"] }),
      );
      assert.deepEqual(page.counts, listed.counts, "counters agree with a count of the rows");
      assert.ok(page.counts.QUEUED > 0);
    });
  });
}
