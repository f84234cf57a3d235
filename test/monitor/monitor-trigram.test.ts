import assert from "node:assert/strict";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { after, before, describe, it } from "node:test";
import { sql } from "kysely";
import { type PagedRunsFilterInput, parseRunsFilter } from "../../src/monitor/filter.ts";
import { monitorMethods } from "../../src/store/kysely-monitor.ts";
import { runFilters } from "../../src/store/monitor-sql.ts";
import { type OpenedStore, openStore } from "../../src/store/open-store.ts";
import type { NewRun, Scope } from "../../src/store/types.ts";
import { startPostgres } from "../helpers/pg.ts";

/**
 * PostgreSQL text search through the trigram index (migration 007, docs/monitoring.md) answers
 * exactly what reading the element's rows answers: the same counts, the same page.
 */

const SCOPE: Scope = { app: "app1", space: "space1" };

const RUNS: { name: string | null; summary: string | null; who: Record<string, string> | null }[] =
  [
    { name: "Nightly Backfill-12", summary: "3 nodes, 120 B result", who: { userId: "alice" } },
    { name: "nightly backfill-120", summary: null, who: { userId: "bob", email: "Bob@X.org" } },
    { name: "50%_off \\sale", summary: "node py failed: 50%_off", who: null },
    { name: null, summary: "ValueError: bad row 7", who: { nickName: 'say "hi"' } },
    { name: "alpha beta", summary: "gamma delta", who: { userName: "Ünïcode Üser" } },
    { name: "abc", summary: "abcabc", who: { userId: "abc" } },
  ];

const QUERIES: Omit<PagedRunsFilterInput, "pageNo" | "pageSize">[] = [
  { quickSearch: "backfill-12" },
  { quickSearch: "NIGHTLY" },
  { quickSearch: "50%_off" },
  { quickSearch: "\\sale" },
  { quickSearch: "bob@x" },
  { quickSearch: 'say "hi' },
  { quickSearch: "beta gamma" },
  { quickSearch: "ünïcode" },
  { quickSearch: "userid" },
  { quickSearch: "ab" },
  { quickSearch: "row 7" },
  { colFilters: [{ name: "runName", value: "backfill-1" }] },
  { colFilters: [{ name: "runName", value: "nightly", op: "prefix" }] },
  { colFilters: [{ name: "initiator", value: "alic" }] },
  { colFilters: [{ name: "runId", value: "trg00" }] },
  { colFilters: [{ name: "runName", value: "abc", op: "eq" }], quickSearch: "abca" },
  { quickSearch: "nightly", runStatusFilter: ["FAILURE"] },
];

/** A run of the searched element, started at `t` unless it is QUEUED. */
function searchRun(
  id: string,
  status: "QUEUED" | "STARTED",
  runName: string | null,
  initiator: Record<string, string> | null,
  t: number,
): NewRun {
  return {
    id,
    scope: SCOPE,
    elementId: "7",
    elementType: "DPL",
    elementName: "search",
    folderId: "f",
    version: "1",
    triggerType: "ASYNC",
    status,
    runName,
    runParam: null,
    initiator,
    parentRunId: null,
    inProcess: false,
    nodeId: null,
    createTime: t,
    startTime: status === "STARTED" ? t : null,
  };
}

describe("monitor text search through the trigram index (postgres)", () => {
  let store: OpenedStore;
  let dataDir: string;

  before(async () => {
    dataDir = fs.mkdtempSync(path.join(os.tmpdir(), "sluice-trgm-"));
    store = await openStore({
      databaseUrl: await (await startPostgres()).createDatabase(),
      dataDir,
    });
    for (const [i, r] of RUNS.entries()) {
      await store.insertRun(
        searchRun(`trg${String(i).padStart(2, "0")}`, "STARTED", r.name, r.who, 1000 + i),
      );
      await store.endRun(`trg${String(i).padStart(2, "0")}`, {
        status: i % 2 ? "FAILURE" : "SUCCESS",
        endTime: 2000 + i,
        summary: r.summary,
      });
    }
    // Unfinished runs are not in the index (migration 018): the same answers must find them.
    for (const [i, [status, name, who]] of (
      [
        ["STARTED", "nightly backfill-12 (running)", { userId: "bob" }],
        ["QUEUED", "queued abc", { userId: "alice" }],
      ] as const
    ).entries()) {
      await store.insertRun(searchRun(`trg-open${i}`, status, name, who, 3000 + i));
    }
  });

  after(async () => {
    await store?.close();
    fs.rmSync(dataDir, { recursive: true, force: true });
  });

  it("the index exists and holds finished runs only", async () => {
    const ix = await sql<{ indexdef: string }>`select indexdef from pg_indexes
      where tablename = 'runs' and indexname = 'runs_search_trgm'`.execute(store.db);
    assert.equal(ix.rows.length, 1);
    assert.match(ix.rows[0]?.indexdef ?? "", /WHERE \(end_time IS NOT NULL\)$/);
  });

  it("the index's expression is tested first, and only where it can narrow", () => {
    const compiled = (quickSearch: string) =>
      store.db
        .selectFrom("runs")
        .select("id")
        .where((eb) =>
          runFilters(
            eb,
            "postgres",
            parseRunsFilter({ pageNo: 0, pageSize: 20, quickSearch }),
            false,
            true,
          ),
        )
        .compile().sql;
    assert.match(
      compiled("nightly"),
      /^select "id" from "runs" where \(\("end_time" is null or \("end_time" is not null and \(lower\(id \|\| ' ' \|\| coalesce\(run_name/,
    );
    assert.doesNotMatch(compiled("ab"), /coalesce\(run_name/, "no trigram in two characters");
  });

  it("every text query answers the same with and without the index", async () => {
    const indexed = monitorMethods(store.db, "postgres", 0);
    let matched = 0;
    for (const input of QUERIES) {
      const q = parseRunsFilter({ pageNo: 0, pageSize: 20, ...input });
      const plain = await store.monitorRuns(SCOPE, "7", q);
      const viaIndex = await indexed.monitorRuns(SCOPE, "7", q);
      assert.deepEqual(viaIndex, plain, JSON.stringify(input));
      matched += plain.totalCount;
    }
    assert.ok(matched > QUERIES.length, "the queries match runs, not nothing");
    const open = await indexed.monitorRuns(
      SCOPE,
      "7",
      parseRunsFilter({ pageNo: 0, pageSize: 20, quickSearch: "backfill-12" }),
    );
    assert.equal(open.counts.STARTED, 1, "an unfinished run is found without the index");
  });
});
