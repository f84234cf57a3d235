import assert from "node:assert/strict";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { after, before, describe, it } from "node:test";
import type { CompiledQuery, DatabaseConnection, Driver } from "kysely";
import { createNoticeStore, type NoticeStore } from "../../src/store/kysely-notices.ts";
import { type OpenedStore, openStore } from "../../src/store/open-store.ts";
import type { Write } from "../../src/store/run-write-rows.ts";
import { applyWrites } from "../../src/store/run-writes.ts";
import { applyStartsAndEnds } from "../../src/store/run-writes-pg.ts";
import type { RunEnd } from "../../src/store/types.ts";
import { kyselyOf } from "../helpers/kysely.ts";
import { startPostgres } from "../helpers/pg.ts";
import { newRun } from "../helpers/runs.ts";

/**
 * Error-handler notifications owed (docs/error-handlers.md, "Durable"): the mark is written by the
 * statement that records the end, taken over from dead nodes (or, owning the database, from any
 * other node), cleared by its holder, and dropped past the recovery window.
 */

const T0 = 1_700_000_000_000;
const end = (status: RunEnd["status"], at: number, notifyBy?: string): RunEnd => ({
  status,
  endTime: at,
  summary: status,
  error: status === "FAILURE" ? "boom" : null,
  ...(notifyBy ? { notifyBy } : {}),
});

/** Liveness for rules that take every owner's marks (it is not read then). */
const ANY = { now: 0, timeoutMs: 0 };

for (const dialect of ["sqlite", "postgres"] as const) {
  describe(`owed error-handler notifications (${dialect})`, () => {
    let store: OpenedStore;
    let notices: NoticeStore;
    let dataDir: string;
    const markOf = async (id: string) =>
      (
        await store.db
          .selectFrom("runs")
          .select("notify_node")
          .where("id", "=", id)
          .executeTakeFirst()
      )?.notify_node;

    /**
     * A node whose last beat is a minute old, by whichever clock the store judges beats with
     * (PostgreSQL's own, or the caller's in SQLite: src/store/node-liveness.ts).
     */
    const stopBeating = async (id: string) => {
      await store.db
        .updateTable("nodes")
        .set((eb) => ({ heartbeat_at: eb("heartbeat_at", "-", 60_000) }))
        .where("id", "=", id)
        .execute();
    };

    before(async () => {
      dataDir = fs.mkdtempSync(path.join(os.tmpdir(), "sluice-owed-"));
      const databaseUrl =
        dialect === "postgres" ? await (await startPostgres()).createDatabase() : undefined;
      store = await openStore({ databaseUrl, dataDir });
      notices = createNoticeStore(store.db, dialect);
    });
    after(async () => {
      await store?.close();
      fs.rmSync(dataDir, { recursive: true, force: true });
    });

    it("the end writes the mark; ends without one leave none; a run ended at insert carries it", async () => {
      const [owed, failed, ok] = [newRun(), newRun(), newRun()];
      for (const r of [owed, failed, ok]) await store.insertRun(r);
      // One turn: the three ends commit in one batch, one statement.
      await Promise.all([
        store.endRun(owed.id, end("FAILURE", T0 + 10, "n1")),
        store.endRun(failed.id, end("FAILURE", T0 + 10)),
        store.endRun(ok.id, end("SUCCESS", T0 + 10)),
      ]);
      const sync = newRun();
      await store.insertRun({ ...sync, status: "STARTED" }, end("FAILURE", T0 + 11, "n1"));
      assert.equal(await markOf(owed.id), "n1");
      assert.equal(await markOf(failed.id), null);
      assert.equal(await markOf(ok.id), null);
      assert.equal(await markOf(sync.id), "n1");
      // The holder's marks are not taken by itself; a wrong node's clear changes nothing.
      assert.deepEqual(await notices.claim({ nodeId: "n1", takeAll: true, live: ANY }, 0, 10), []);
      assert.equal(await notices.clear(owed.id, "n2"), false);
      assert.equal(await notices.clear(sync.id, "n1"), true);
      assert.equal(await markOf(sync.id), null);
      assert.equal(await notices.clear(owed.id, "n1"), true);
    });

    it("a live owner keeps its marks; a dead one's are taken once, oldest end first, within the window", async () => {
      const runs = [newRun(), newRun(), newRun(), newRun()];
      for (const r of runs) await store.insertRun(r);
      const [old, a, b, c] = runs.map((r) => r.id) as [string, string, string, string];
      await store.endRun(old, end("FAILURE", T0 - 100_000, "dead"));
      await store.endRun(b, end("FAILURE", T0 + 2, "dead"));
      await store.endRun(a, end("FAILURE", T0 + 1, "dead"));
      await store.endRun(c, end("FAILURE", T0 + 3, "live"));
      for (const n of ["dead", "live", "n9", "n8", "n7"]) await store.heartbeat(n, T0);
      await stopBeating("dead");
      const rule = (nodeId: string) => ({
        nodeId,
        takeAll: false,
        live: { now: T0, timeoutMs: 5_000 },
      });
      // Past the window: dropped, never sent.
      assert.deepEqual(await notices.dropBefore(rule("n9"), T0 - 50_000), [old]);
      assert.equal(await markOf(old), null);
      assert.deepEqual(await notices.claim(rule("n9"), T0 - 50_000, 1), [a]);
      assert.deepEqual(await notices.claim(rule("n8"), T0 - 50_000, 10), [b]);
      assert.equal(await markOf(a), "n9");
      assert.equal(await markOf(b), "n8");
      // What live nodes took, and the live node's own mark, are not taken again.
      assert.deepEqual(await notices.claim(rule("n7"), T0 - 50_000, 10), []);
      assert.equal(await markOf(c), "live");
      // Once n9 stops beating, its marks are another's to take.
      await stopBeating("n9");
      assert.deepEqual(await notices.claim(rule("n7"), T0 - 50_000, 10), [a]);
      // Owning the database: every other owner's marks, live or not (n7 holds a already).
      assert.deepEqual(
        (await notices.claim({ nodeId: "n7", takeAll: true, live: ANY }, 0, 10)).sort(),
        [b, c].sort(),
      );
      for (const id of [a, b, c]) await notices.clear(id, "n7");
    });

    it("a pass takes the apps in turn: one app's many owed runs do not hold back another's", async () => {
      const flood = Array.from({ length: 5 }, () =>
        newRun({ scope: { app: "flood", space: "s" } }),
      );
      const quiet = newRun({ scope: { app: "quiet", space: "s" } });
      for (const r of [...flood, quiet]) await store.insertRun(r);
      // The flooding app's runs ended first: oldest first alone would take only them.
      for (const [i, r] of flood.entries())
        await store.endRun(r.id, end("FAILURE", T0 + 100 + i, "gone"));
      await store.endRun(quiet.id, end("FAILURE", T0 + 200, "gone"));
      const rule = { nodeId: "taker", takeAll: true, live: ANY };
      const first = await notices.claim(rule, T0, 2);
      assert.deepEqual(first.sort(), [flood[0]?.id, quiet.id].sort());
      const rest = await notices.claim(rule, T0, 10);
      assert.deepEqual(
        rest.sort(),
        flood
          .slice(1)
          .map((r) => r.id)
          .sort(),
      );
      for (const id of [...first, ...rest]) await notices.clear(id, "taker");
    });

    it("marking an end adds no statement to the batch that records it", async () => {
      const ends = (notifyBy?: string): Write[] => [
        { kind: "end", id: "r1", end: end("FAILURE", T0, notifyBy) },
        { kind: "end", id: "r2", end: end("SUCCESS", T0) },
      ];
      // A Kysely whose connection keeps the statements instead of running them (no rows back).
      const count = async (writes: Write[]) => {
        const sent: CompiledQuery[] = [];
        const connection: DatabaseConnection = {
          executeQuery: async (q) => {
            sent.push(q);
            return { rows: [] };
          },
          streamQuery: () => {
            throw new Error("not streamed");
          },
        };
        const driver: Driver = {
          init: async () => {},
          acquireConnection: async () => connection,
          beginTransaction: async () => {},
          commitTransaction: async () => {},
          rollbackTransaction: async () => {},
          releaseConnection: async () => {},
          destroy: async () => {},
        };
        const db = kyselyOf(dialect, driver);
        if (dialect === "postgres") await applyStartsAndEnds(db, writes);
        else await db.transaction().execute((tx) => applyWrites(tx, writes));
        return sent.length;
      };
      assert.equal(await count(ends("n1")), await count(ends()));
      assert.equal(await count(ends()), 1, "the ends are one statement");
    });
  });
}
