import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { dto, JSON_CLIENTS, QUERY_CLIENTS, sendJson } from "../helpers/clients.ts";
import { DF, deployAndActivate, NO_SCRIPT_FLOW } from "../helpers/flows.ts";
import { scopeHeaders, startServer, type TestServer } from "../helpers/server.ts";

/**
 * Endpoints 6–8 and 14 (monitor flows, runs and one run; the flow list) as every client writes
 * them (docs/errors.md, "How fields are read").
 */
describe("monitoring requests from every client", () => {
  let server: TestServer;
  const h = scopeHeaders();
  const ORDERS = { orders: [{ amount: 2, qty: 3 }] };
  const runIds: string[] = [];
  const call = (method: string, p: string, body?: unknown, headers: Record<string, string> = h) =>
    server.call(method, p, { headers, body });
  const FILTER_UNSET = [
    "elementType",
    "folderId",
    "elementId",
    "runStatusFilter",
    "triggerFilter",
    "orderBy",
    "versionFilter",
    "quickSearch",
    "colFilters",
  ];
  const page = (optional: Record<string, unknown>) =>
    dto(
      { pageNo: 0, pageSize: 10, elementName: "mon" },
      { path: "/mon", ...optional },
      FILTER_UNSET.filter((k) => !(k in optional)),
    );

  before(async () => {
    server = await startServer();
    await deployAndActivate(server, "mon", NO_SCRIPT_FLOW, {}, h, "/mon");
    for (let i = 0; i < 3; i++) {
      const r = await call("POST", `${DF}/run-sync`, {
        elementName: "mon",
        path: "/mon",
        parameter: ORDERS,
      });
      assert.equal(r.body.status, true, r.text);
      runIds.push(r.headers.get("x-run-id") ?? "");
    }
  });
  after(() => server.close());

  it("runs: a filter with every unset field null or left out lists every run", async () => {
    for (const c of JSON_CLIENTS) {
      const r = await sendJson(server, c, "POST", `${DF}/monitor/runs`, page({}));
      assert.equal(r.body.data?.totalCount, 3, `${c.name}: ${r.text}`);
      assert.equal(r.body.data.successCount, 3, r.text);
      assert.deepEqual(
        r.body.data.runs.map((x: { runId: string }) => x.runId).sort(),
        [...runIds].sort(),
      );
    }
  });

  it("runs: nested objects (orderBy, colFilters) with unset fields read alike", async () => {
    // One client class for both filter kinds: Jackson writes value and op as null on an interval.
    const colFilter = dto({ name: "createTime" }, { from: 0 }, ["value", "op", "to"]);
    const orderBy = dto({ name: "createTime" }, {}, ["asc"]);
    const filters = page({
      colFilters: [colFilter],
      orderBy: [orderBy],
      runStatusFilter: ["SUCCESS"],
      triggerFilter: ["SYNC"],
      versionFilter: ["1"],
    });
    for (const c of JSON_CLIENTS) {
      const r = await sendJson(server, c, "POST", `${DF}/monitor/runs`, filters);
      assert.equal(r.body.data?.totalCount, 3, `${c.name} ${c.render(filters)}: ${r.text}`);
      const times = r.body.data.runs.map((x: { createTime: number }) => x.createTime);
      assert.deepEqual(
        times,
        [...times].sort((a, b) => a - b),
        `${c.name}: ascending`,
      );
    }
  });

  it("runs: empty filter lists and a page of zero are filters left out, not dropped pages", async () => {
    // Go writes pageNo 0 (required, no omitempty) and leaves out empty optional slices.
    const empty = page({
      runStatusFilter: [],
      triggerFilter: [],
      versionFilter: [],
      quickSearch: "",
    });
    for (const c of JSON_CLIENTS) {
      const r = await sendJson(server, c, "POST", `${DF}/monitor/runs`, empty);
      assert.equal(r.body.data?.totalCount, 3, `${c.name} ${c.render(empty)}: ${r.text}`);
    }
  });

  it("run: the runId query from every client; an empty runId is a missing one", async () => {
    for (const q of QUERY_CLIENTS) {
      const r = await call("GET", `${DF}/monitor/run?${q.render({ runId: runIds[0] })}`);
      assert.equal(r.body.data?.runId, runIds[0], `${q.name}: ${r.text}`);
      assert.equal(r.body.data.elementName, "mon");
    }
    for (const qs of ["runId=", "runId", ""]) {
      const r = await call("GET", `${DF}/monitor/run?${qs}`);
      assert.equal(r.body.code, 400, `${qs}: ${r.text}`);
      assert.match(r.body.message, /querystring\.runId is required/, r.text);
    }
  });

  it("flows and the flow list: a GET with Content-Type: application/json and no body", async () => {
    for (const url of ["/monitor/flows", "/flow/list"]) {
      const plain = await call("GET", `${DF}${url}`);
      const json = await call("GET", `${DF}${url}`, undefined, {
        ...h,
        "content-type": "application/json",
      });
      assert.equal(plain.body.status, true, plain.text);
      assert.deepEqual(json.body, plain.body, `${url}: ${json.text}`);
      assert.ok(
        plain.body.data.some(
          (f: { elementName?: string; element?: { elementName: string } }) =>
            (f.elementName ?? f.element?.elementName) === "mon",
        ),
        plain.text,
      );
    }
  });

  it("a value of the wrong JSON type is a 400 naming the field", async () => {
    const base = { pageNo: 0, pageSize: 10, elementName: "mon", path: "/mon" };
    const cases: [unknown, RegExp][] = [
      [{ ...base, pageNo: "0" }, /body\.pageNo must be integer/],
      [{ ...base, pageSize: 10.5 }, /body\.pageSize must be integer/],
      [{ ...base, runStatusFilter: "SUCCESS" }, /body\.runStatusFilter must be array/],
      [{ ...base, versionFilter: [1] }, /body\.versionFilter\.0 must be string/],
      [{ ...base, quickSearch: 5 }, /body\.quickSearch must be string/],
      [
        { ...base, orderBy: [{ name: "createTime", asc: "up" }] },
        /body\.orderBy\.0\.asc must be boolean/,
      ],
      [{ ...base, colFilters: { name: "createTime" } }, /body\.colFilters must be array/],
      [{ ...base, elementId: [1] }, /body\.elementId/],
    ];
    for (const [body, field] of cases) {
      const r = await call("POST", `${DF}/monitor/runs`, body);
      assert.equal(r.body.code, 400, `${JSON.stringify(body)}: ${r.text}`);
      assert.match(r.body.message, field, r.text);
    }
  });

  it("pageSize out of range names the range; required paging fields sent as null are missing", async () => {
    for (const pageSize of [0, 101]) {
      const r = await call("POST", `${DF}/monitor/runs`, {
        pageNo: 0,
        pageSize,
        elementName: "mon",
      });
      assert.equal(r.body.code, 400, r.text);
      assert.match(r.body.message, /body\.pageSize must be from 1 to 100/, r.text);
    }
    const neg = await call("POST", `${DF}/monitor/runs`, {
      pageNo: -1,
      pageSize: 1,
      elementName: "mon",
    });
    assert.match(neg.body.message, /body\.pageNo must be >= 0/, neg.text);
    const nulls = await call("POST", `${DF}/monitor/runs`, {
      pageNo: null,
      pageSize: 10,
      elementName: "mon",
    });
    assert.match(nulls.body.message, /body\.pageNo is required/, nulls.text);
  });

  it("an enum sent as a number (System.Text.Json's default for enums) lists the allowed values", async () => {
    const body = { pageNo: 0, pageSize: 10, elementName: "mon", path: "/mon" };
    const status = await call("POST", `${DF}/monitor/runs`, { ...body, runStatusFilter: [2] });
    assert.equal(status.body.code, 400, status.text);
    assert.match(
      status.body.message,
      /body\.runStatusFilter\.0 must be one of QUEUED, STARTED, SUCCESS, FAILURE, CANCELED/,
    );
    const trigger = await call(
      "POST",
      `${DF}/monitor/runs`,
      { ...body, triggerFilter: ["sync"] },
      {
        ...h,
        language: "zh-cn",
      },
    );
    assert.match(
      trigger.body.message,
      /^请求参数错误：body\.triggerFilter\.0 .*API, SCHEDULED, SYNC, ASYNC/,
      trigger.text,
    );
  });

  it("an empty JSON body is the 400 for a missing body", async () => {
    const r = await server.call("POST", `${DF}/monitor/runs`, {
      headers: { ...h, "content-type": "application/json; charset=utf-8" },
      raw: "",
    });
    assert.equal(r.body.code, 400, r.text);
    assert.match(r.body.message, /body is required/, r.text);
  });
});
