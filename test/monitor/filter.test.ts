import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { SluiceError } from "../../src/errors.ts";
import { parseRunsFilter } from "../../src/monitor/filter.ts";
import { pageWindow, totalPages } from "../../src/monitor/paging.ts";
import { applyOrder, likeEscape, runFilters } from "../../src/store/monitor-sql.ts";
import { kyselyOf } from "../helpers/kysely.ts";

const base = { pageNo: 0, pageSize: 20 };
const is400 = (fn: () => unknown, re: RegExp) =>
  assert.throws(
    fn,
    (e: unknown) => e instanceof SluiceError && e.code === 400 && re.test(e.message),
  );

describe("paging arithmetic", () => {
  it("pageNo counts from 0; offset = pageNo × pageSize", () => {
    assert.deepEqual(pageWindow(0, 20), { limit: 20, offset: 0 });
    assert.deepEqual(pageWindow(3, 25), { limit: 25, offset: 75 });
  });
  it("pageSize 1..100, pageNo ≥ 0, else 400", () => {
    assert.deepEqual(pageWindow(0, 1), { limit: 1, offset: 0 });
    assert.deepEqual(pageWindow(0, 100), { limit: 100, offset: 0 });
    is400(() => pageWindow(0, 0), /pageSize/);
    is400(() => pageWindow(0, 101), /pageSize/);
    is400(() => pageWindow(-1, 10), /pageNo/);
    is400(() => pageWindow(0.5, 10), /pageNo/);
  });
  it("totalPage = ceil(totalCount / pageSize)", () => {
    assert.equal(totalPages(0, 10), 0);
    assert.equal(totalPages(1, 10), 1);
    assert.equal(totalPages(10, 10), 1);
    assert.equal(totalPages(11, 10), 2);
    assert.equal(totalPages(1_000_000, 100), 10_000);
  });
});

describe("parseRunsFilter", () => {
  it("defaults: no filters, createTime descending then runId descending", () => {
    const q = parseRunsFilter(base);
    assert.deepEqual(q, {
      statuses: null,
      triggers: null,
      versions: null,
      quickSearch: null,
      colFilters: [],
      orderBy: [
        { field: "createTime", asc: false },
        { field: "runId", asc: false },
      ],
      limit: 20,
      offset: 0,
    });
  });
  it("empty lists and blank search mean no filter; search is lower-cased", () => {
    const q = parseRunsFilter({
      ...base,
      runStatusFilter: [],
      triggerFilter: [],
      versionFilter: [],
      quickSearch: "  ",
    });
    assert.deepEqual([q.statuses, q.triggers, q.versions, q.quickSearch], [null, null, null, null]);
    assert.equal(parseRunsFilter({ ...base, quickSearch: " Nightly " }).quickSearch, "nightly");
  });
  it("rejects unknown statuses, triggers, sort fields, columns and ops", () => {
    is400(() => parseRunsFilter({ ...base, runStatusFilter: ["DONE"] }), /runStatusFilter/);
    is400(() => parseRunsFilter({ ...base, triggerFilter: ["CRON"] }), /triggerFilter/);
    is400(() => parseRunsFilter({ ...base, orderBy: [{ name: "elementName" }] }), /orderBy\[0\]/);
    is400(
      () => parseRunsFilter({ ...base, colFilters: [{ name: "result", value: "x" }] }),
      /colFilters\[0\]/,
    );
    is400(
      () =>
        parseRunsFilter({ ...base, colFilters: [{ name: "runName", value: "x", op: "regex" }] }),
      /op/,
    );
    is400(() => parseRunsFilter({ ...base, colFilters: [{ name: "runName" }] }), /value/);
    is400(
      () => parseRunsFilter({ ...base, colFilters: [{ name: "duration", from: 5, to: 1 }] }),
      /from/,
    );
  });
  it("string filters default to contains; interval filters keep open ends", () => {
    const q = parseRunsFilter({
      ...base,
      colFilters: [
        { name: "runName", value: "a" },
        { name: "startTime", from: 5 },
      ],
    });
    assert.deepEqual(q.colFilters, [
      { kind: "string", column: "runName", value: "a", op: "contains" },
      { kind: "interval", column: "startTime", from: 5, to: null },
    ]);
  });
  it("asc defaults to true; runId tie-break follows the last key; repeats are dropped", () => {
    assert.deepEqual(
      parseRunsFilter({
        ...base,
        orderBy: [{ name: "duration" }, { name: "duration", asc: false }],
      }).orderBy,
      [
        { field: "duration", asc: true },
        { field: "runId", asc: true },
      ],
    );
    assert.deepEqual(
      parseRunsFilter({ ...base, orderBy: [{ name: "runId", asc: false }] }).orderBy,
      [{ field: "runId", asc: false }],
    );
  });
});

describe("compiled SQL", () => {
  const evil = "x'); drop table runs; --";

  for (const dialect of ["sqlite", "postgres"] as const) {
    it(`${dialect}: request text only ever travels as parameters`, () => {
      const q = parseRunsFilter({
        ...base,
        runStatusFilter: ["SUCCESS"],
        versionFilter: [evil],
        quickSearch: evil,
        colFilters: [
          { name: "runName", value: evil, op: "eq" },
          { name: "initiator", value: evil, op: "prefix" },
          { name: "runId", value: evil },
        ],
        orderBy: [{ name: "startTime" }],
      });
      const db = kyselyOf(dialect);
      const compiled = applyOrder(
        db
          .selectFrom("runs")
          .select("id")
          .where((eb) => runFilters(eb, dialect, q, true)),
        q.orderBy,
        dialect,
      ).compile();
      assert.ok(!compiled.sql.includes("drop table"), compiled.sql);
      assert.ok(compiled.parameters.includes(evil));
      assert.ok(
        compiled.parameters.some(
          (p) => typeof p === "string" && p.includes("drop table") && p.startsWith("%"),
        ),
      );
      assert.match(
        compiled.sql,
        dialect === "postgres" ? /"start_time" asc nulls first/ : /"start_time" asc/,
      );
    });
  }

  it("status filter is left out of the counting query", () => {
    const q = parseRunsFilter({ ...base, runStatusFilter: ["FAILURE"], triggerFilter: ["SYNC"] });
    const db = kyselyOf("sqlite");
    const counting = db
      .selectFrom("runs")
      .select("status")
      .where((eb) => runFilters(eb, "sqlite", q, false))
      .compile();
    assert.ok(!counting.parameters.includes("FAILURE"));
    assert.ok(counting.parameters.includes("SYNC"));
  });

  it("LIKE wildcards in user text match literally", () => {
    assert.equal(likeEscape("50%_off\\"), "50\\%\\_off\\\\");
  });
});
