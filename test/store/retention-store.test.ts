import assert from "node:assert/strict";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { after, before, describe, it } from "node:test";
import { sql } from "kysely";
import { type OpenedStore, openStore } from "../../src/store/open-store.ts";
import { createRetentionStore, type RetentionStore } from "../../src/store/retention-store.ts";
import type { NewRun, RunEnd, Scope } from "../../src/store/types.ts";
import { startPostgres } from "../helpers/pg.ts";
import { newRun } from "../helpers/runs.ts";

/**
 * The store side of run retention (docs/retention.md) in both dialects: a batch deletes only
 * finished runs of its element that ended before the cutoff, oldest first, with their counters,
 * finished webhook deliveries and error-handler results; concurrent purgers (a cluster's nodes)
 * split the work and count each run once.
 */

const SCOPE: Scope = { app: "app1", space: "space1" };
const OTHER: Scope = { app: "app1", space: "space2" };
const DAY = 86_400_000;
const NOW = Date.UTC(2025, 5, 1);

let seq = 0;
function flowRun(scope: Scope, elementId: string, over: Partial<NewRun> = {}): NewRun {
  seq++;
  return newRun({
    id: `ret${String(seq).padStart(7, "0")}`,
    scope,
    elementId,
    elementType: "DPL",
    elementName: "flow",
    version: "1",
    triggerType: seq % 2 ? "ASYNC" : "SCHEDULED",
    createTime: NOW - 400 * DAY + seq,
    ...over,
  });
}

const ended = (endTime: number, status: RunEnd["status"] = "SUCCESS"): RunEnd => ({
  status,
  endTime,
  summary: null,
});

/** Counter rows against a count of the finished rows (docs/monitoring.md, "Run counters"). */
async function countersExact(store: OpenedStore): Promise<void> {
  type Row = { k: string; n: number };
  const kept = await sql<Row>`select app || '/' || space || '/' || element_id || '/' ||
    trigger_type || '/' || status as k, n from run_status_counts where n <> 0`.execute(store.db);
  const counted = await sql<Row>`select app || '/' || space || '/' || element_id || '/' ||
    trigger_type || '/' || status as k, count(*) as n from runs
    where status in ('SUCCESS', 'FAILURE', 'CANCELED')
    group by app, space, element_id, trigger_type, status`.execute(store.db);
  const line = (r: Row) => `${r.k}=${Number(r.n)}`;
  assert.deepEqual(kept.rows.map(line).sort(), counted.rows.map(line).sort());
}

for (const dialect of ["sqlite", "postgres"] as const) {
  describe(`retention store (${dialect})`, () => {
    let store: OpenedStore;
    let retention: RetentionStore;
    let dataDir: string;

    before(async () => {
      dataDir = fs.mkdtempSync(path.join(os.tmpdir(), "sluice-retention-"));
      const databaseUrl =
        dialect === "postgres" ? await (await startPostgres()).createDatabase() : undefined;
      store = await openStore({ databaseUrl, dataDir });
      retention = createRetentionStore(store.db, store.dialect);
    });

    after(async () => {
      await store?.close();
      fs.rmSync(dataDir, { recursive: true, force: true });
    });

    it("deletes only the element's finished runs that ended before the cutoff, oldest first", async () => {
      const old = [30, 20, 10].map((d) => ({ run: flowRun(SCOPE, "1"), end: NOW - d * DAY }));
      const recent = flowRun(SCOPE, "1");
      const running = flowRun(SCOPE, "1", { status: "STARTED", startTime: NOW - 90 * DAY });
      const queued = flowRun(SCOPE, "1");
      const otherElement = flowRun(SCOPE, "2");
      const otherScope = flowRun(OTHER, "1");
      for (const { run, end } of old) await store.insertRun(run, ended(end, "FAILURE"));
      await store.insertRun(recent, ended(NOW - 2 * DAY));
      await store.insertRun(running);
      await store.insertRun(queued);
      await store.insertRun(otherElement, ended(NOW - 90 * DAY));
      await store.insertRun(otherScope, ended(NOW - 90 * DAY));
      const runs = { elementId: "1", scope: SCOPE, cutoff: NOW - 5 * DAY };

      assert.equal(await retention.countExpired(runs, 100), 3);
      // A bounded count stops one past its cap.
      assert.equal(await retention.countExpired(runs, 1), 2);
      const first = await retention.purgeBatch(runs, 2);
      assert.deepEqual(first, [old[0]?.run.id, old[1]?.run.id], "the oldest end first");
      await countersExact(store);
      assert.deepEqual(await retention.purgeBatch(runs, 2), [old[2]?.run.id]);
      assert.deepEqual(await retention.purgeBatch(runs, 2), []);
      assert.equal(await retention.countExpired(runs, 100), 0);
      for (const kept of [recent, running, queued, otherElement, otherScope])
        assert.ok(await store.getRun(null, kept.id), `${kept.id} is kept`);
      await countersExact(store);
    });

    it("takes a run's error-handler results and finished deliveries with it; a pending delivery stays", async () => {
      const run = flowRun(SCOPE, "3");
      await store.insertRun(run, ended(NOW - 40 * DAY, "FAILURE"));
      await store.addErrorHandlerResult(run.id, {
        kind: "bot",
        ok: true,
        attempts: 1,
        at: NOW - 40 * DAY,
        event: "run.failure",
      });
      for (const [i, status] of ["DELIVERED", "PENDING"].entries())
        await store.db
          .insertInto("webhook_deliveries")
          .values({
            id: `${run.id}.${i}`,
            run_id: run.id,
            app: SCOPE.app,
            space: SCOPE.space,
            url: "http://example.test/hook",
            event: "FAILURE",
            body: "{}",
            status,
            attempts: 1,
            log: "[]",
            next_at: NOW,
            claimed_by: null,
            claim_until: null,
            created_at: NOW - 40 * DAY,
          })
          .execute();
      const gone = await retention.purgeBatch({ elementId: "3", scope: SCOPE, cutoff: NOW }, 10);
      assert.deepEqual(gone, [run.id]);
      assert.deepEqual(await store.errorHandlerResults(run.id), []);
      const left = await store.db
        .selectFrom("webhook_deliveries")
        .select(["id", "status"])
        .where("run_id", "=", run.id)
        .execute();
      assert.deepEqual(
        left.map((d) => ({ ...d })),
        [{ id: `${run.id}.1`, status: "PENDING" }],
      );
    });

    it("concurrent purgers delete each run once and keep the counters exact", async () => {
      const runs = Array.from({ length: 240 }, (_, i) => flowRun(SCOPE, "4", { createTime: i }));
      for (const r of runs) await store.insertRun(r, ended(NOW - 50 * DAY + r.createTime));
      const keep = flowRun(SCOPE, "4");
      await store.insertRun(keep, ended(NOW));
      const target = { elementId: "4", scope: SCOPE, cutoff: NOW - DAY };
      const purger = async () => {
        const mine: string[] = [];
        for (;;) {
          const ids = await retention.purgeBatch(target, 25);
          mine.push(...ids);
          if (ids.length < 25) return mine;
        }
      };
      const all = (await Promise.all([purger(), purger(), purger()])).flat();
      // Purgers stop on a short batch; whatever a stop left, one more pass finds.
      all.push(...(await purger()));
      assert.equal(all.length, runs.length, "every expired run deleted");
      assert.equal(new Set(all).size, all.length, "no run deleted twice");
      assert.ok(await store.getRun(null, keep.id));
      await countersExact(store);
    });
  });
}
