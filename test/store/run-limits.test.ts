import assert from "node:assert/strict";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { after, before, describe, it } from "node:test";
import { CompiledQuery, createQueryId, type KyselyPlugin, type RootOperationNode } from "kysely";
import { runLimitMethods } from "../../src/store/kysely-run-limits.ts";
import { type OpenedStore, openStore } from "../../src/store/open-store.ts";
import { startPostgres } from "../helpers/pg.ts";
import { newRun } from "../helpers/runs.ts";

/** The claim of limited runs (docs/run-limits.md), the same in both dialects. */
const DIALECTS = {
  sqlite: () => openStore({ dataDir: fs.mkdtempSync(path.join(os.tmpdir(), "sluice-lim-")) }),
  postgres: async () =>
    openStore({
      databaseUrl: await (await startPostgres()).createDatabase(),
      dataDir: os.tmpdir(),
    }),
};

for (const [dialect, open] of Object.entries(DIALECTS)) {
  describe(`run limits (${dialect})`, () => {
    let store: OpenedStore;
    before(async () => {
      store = await open();
    });
    after(() => store.close());

    it("a limited run starts only within its element's limit, oldest first", async () => {
      const [a, b, c] = [1, 2, 3].map(() => newRun({ elementId: "7", runLimit: 2 }));
      for (const r of [a, b, c]) await store.insertRun(r as NonNullable<typeof r>);
      const ids = [a, b, c].map((r) => r?.id as string);
      const [ida, idb, idc] = ids as [string, string, string];
      // startRun never starts a limited run.
      assert.equal(await store.startRun(ida, 1, "n"), undefined);
      assert.deepEqual(
        (await store.startableRuns("7")).map((r) => r.id),
        [ida, idb],
      );
      // Two older runs wait: the youngest may not take their slots.
      assert.equal(await store.claimLimited(idc, 1, "n"), undefined);
      assert.equal((await store.claimLimited(idb, 1, "n"))?.status, "STARTED");
      assert.equal((await store.claimLimited(ida, 1, "n"))?.status, "STARTED");
      assert.equal(await store.claimLimited(idc, 1, "n"), undefined);
      assert.deepEqual(await store.startableRuns(), []);
      await store.endRun(ida, { status: "SUCCESS", endTime: 2, summary: null });
      assert.deepEqual(
        (await store.startableRuns()).map((r) => r.id),
        [idc],
      );
      assert.equal((await store.claimLimited(idc, 3, "n"))?.status, "STARTED");
      // Not QUEUED any more: a second delivery does nothing.
      assert.equal(await store.claimLimited(idc, 3, "n"), undefined);
    });

    it("concurrent claims of one element never exceed its limit", async () => {
      const runs = Array.from({ length: 20 }, () => newRun({ elementId: "8", runLimit: 3 }));
      for (const r of runs) await store.insertRun(r);
      const got = await Promise.all(runs.map((r) => store.claimLimited(r.id, 1, "n")));
      assert.equal(got.filter(Boolean).length, 3);
      const started = await store.unfinishedRuns(["STARTED"]);
      assert.equal(started.filter((r) => r.elementId === "8").length, 3);
    });

    it("counts the QUEUED runs of each app, in all its spaces, and nothing else", async () => {
      const before = await store.queuedRunsByApp();
      const of = (app: string) => before.get(app) ?? 0;
      const runs = [
        newRun({ scope: { app: "qa", space: "s1" } }),
        newRun({ scope: { app: "qa", space: "s2" } }),
        newRun({ scope: { app: "qb", space: "s1" }, runLimit: 1 }),
        newRun({ scope: { app: "qb", space: "s1" } }),
      ];
      for (const r of runs) await store.insertRun(r);
      const [, , , ended] = runs;
      await store.endRun((ended as (typeof runs)[number]).id, {
        status: "CANCELED",
        endTime: 2,
        summary: null,
      });
      await store.insertRun(newRun({ scope: { app: "qc", space: "s1" }, status: "STARTED" }));
      const now = await store.queuedRunsByApp();
      assert.equal((now.get("qa") ?? 0) - of("qa"), 2);
      assert.equal((now.get("qb") ?? 0) - of("qb"), 1, "the waiting limited run counts");
      assert.equal(now.get("qc") ?? 0, of("qc"), "a STARTED run takes no place");
    });
  });
}

describe("run limits (sqlite plans)", () => {
  it("the claim, the wake-up and the sweep read runs through the partial indexes, never a scan", async () => {
    const store = await DIALECTS.sqlite();
    try {
      const seen: RootOperationNode[] = [];
      const capture: KyselyPlugin = {
        transformQuery: (args) => {
          seen.push(args.node);
          return args.node;
        },
        transformResult: async (args) => args.result,
      };
      const limits = runLimitMethods(store.db.withPlugin(capture), "sqlite");
      const run = newRun({ elementId: "9", runLimit: 1 });
      await store.insertRun(run);
      await limits.claimLimited(run.id, 1, "n");
      await limits.startableRuns("9");
      await limits.startableRuns();
      const plans: string[] = [];
      for (const node of seen) {
        const q = store.db.getExecutor().compileQuery(node, createQueryId());
        if (!/^\s*select/i.test(q.sql)) continue;
        const { rows } = await store.db.executeQuery<{ detail: string }>(
          CompiledQuery.raw(`EXPLAIN QUERY PLAN ${q.sql}`, [...q.parameters]),
        );
        plans.push(...rows.map((r) => r.detail));
      }
      const onRuns = plans.filter((d) => /\bruns\b/.test(d));
      assert.ok(onRuns.length >= 4, plans.join("\n"));
      // The one read by primary key (the claimed run itself) is fine; every count and list goes
      // through an index of unfinished runs, whatever the number of finished ones.
      for (const d of onRuns)
        assert.match(
          d,
          /USING (COVERING )?INDEX (runs_element_unfinished|runs_unfinished)|sqlite_autoindex_runs_1 \(id=\?\)/,
          d,
        );
    } finally {
      await store.close();
    }
  });
});
