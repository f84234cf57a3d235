import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { makeSessionCookie, signToken } from "../../src/auth/tokens.ts";
import { DF, deployAndActivate, NO_SCRIPT_FLOW } from "../helpers/flows.ts";
import {
  OTHER_SCOPE,
  SCOPE,
  scopeHeaders,
  startServer,
  type TestServer,
  upload,
} from "../helpers/server.ts";

const ORDERS = { orders: [{ amount: 2, qty: 3 }] };

describe("monitoring over HTTP", () => {
  let server: TestServer;
  const h = scopeHeaders();
  const call = (method: string, p: string, body?: unknown, headers: Record<string, string> = h) =>
    server.call(method, DF + p, { headers, body });
  const runs = (body: Record<string, unknown>, headers: Record<string, string> = h) =>
    call(
      "POST",
      "/monitor/runs",
      { pageNo: 0, pageSize: 10, elementName: "plain", ...body },
      headers,
    );
  const syncIds: string[] = [];

  before(async () => {
    server = await startServer();
    const d = await call("POST", "/flow/deploy", {
      elementName: "plain",
      revisionName: "first cut",
      path: "/flows",
      flow: NO_SCRIPT_FLOW,
      configure: { runNameTemplate: "${elementName}-${param.tag}" },
      description: { en: "Plain orders", "zh-cn": "普通订单" },
    });
    assert.equal(d.body.status, true, d.text);
    assert.equal(
      (await call("POST", "/flow/activate", { elementName: "plain", path: "/flows" })).body.data,
      "APPROVED",
    );
    await deployAndActivate(server, "quiet", NO_SCRIPT_FLOW);
    for (const tag of ["a", "b", "c"]) {
      const r = await call("POST", "/run-sync", {
        elementName: "plain",
        parameter: { ...ORDERS, tag },
      });
      syncIds.push(r.headers.get("x-run-id") ?? "");
    }
    await upload(server, [{ name: "echo.py", content: "def main(p):\n    return p\n" }], {
      path: "/py",
    });
    const t = await server.call("POST", "/script/script/run-sync", {
      headers: h,
      body: { elementName: "echo", parameter: { x: 1 } },
    });
    assert.deepEqual(t.body.data, { x: 1 });
  });
  after(() => server.close());

  it("GET /monitor/flows: every DPL element with revision, release, lastRun, totalRuns, summary", async () => {
    const r = await call("GET", "/monitor/flows", undefined, { ...h, language: "zh-cn" });
    assert.equal(r.body.status, true, r.text);
    const plain = r.body.data.find(
      (f: { element: { elementName: string } }) => f.element.elementName === "plain",
    );
    assert.deepEqual(
      r.body.data.map((f: { element: { elementName: string } }) => f.element.elementName),
      ["plain", "quiet"],
    );
    assert.equal(plain.element.description, "普通订单");
    assert.equal(plain.element.path, "/flows");
    assert.equal(typeof plain.element.elementId, "string");
    assert.equal(typeof plain.element.folderId, "string");
    assert.deepEqual(
      [plain.status, plain.revision],
      ["APPROVED", { version: "1", name: "first cut" }],
    );
    assert.equal(plain.lastRelease.user.userId, "alice");
    assert.match(plain.lastRelease.time, /^\d{4}-\d\d-\d\dT/);
    assert.equal(plain.totalRuns, 3);
    assert.deepEqual(
      [
        plain.lastRun.runId,
        plain.lastRun.runStatus,
        plain.lastRun.triggerType,
        plain.lastRun.runName,
      ],
      [syncIds[2], "SUCCESS", "SYNC", "plain-c"],
    );
    assert.match(plain.summary, /3 runs/);
    assert.equal(plain.schedule, undefined, "no scheduler wired");
    const en = await call("GET", "/monitor/flows");
    assert.equal(en.body.data[0].element.description, "Plain orders");
  });

  it("POST /monitor/runs: page, counts and every optional field that has a value", async () => {
    const r = await runs({});
    assert.equal(r.body.status, true, r.text);
    const d = r.body.data;
    assert.deepEqual(
      [
        d.totalCount,
        d.totalPage,
        d.successCount,
        d.failureCount,
        d.queuedCount,
        d.startedCount,
        d.canceledCount,
      ],
      [3, 1, 3, 0, 0, 0, 0],
    );
    assert.deepEqual(
      d.runs.map((x: { runId: string }) => x.runId),
      [...syncIds].reverse(),
    );
    const run = d.runs[0];
    for (const k of ["createTime", "startTime", "endTime", "duration"])
      assert.equal(typeof run[k], "number", k);
    assert.deepEqual(
      [run.version, run.runName, run.initiator, JSON.parse(run.runParam).tag],
      ["1", "plain-c", { userId: "alice" }, "c"],
    );
    assert.equal(typeof run.summary, "string");
  });

  it("paging arithmetic: totalPage = ceil(totalCount / pageSize)", async () => {
    const p0 = (await runs({ pageSize: 2 })).body.data;
    const p1 = (await runs({ pageSize: 2, pageNo: 1 })).body.data;
    assert.deepEqual([p0.totalPage, p0.runs.length, p1.runs.length], [2, 2, 1]);
    assert.deepEqual(
      [...p0.runs, ...p1.runs].map((x: { runId: string }) => x.runId),
      [...syncIds].reverse(),
    );
  });

  it("pageSize outside 1..100, negative pageNo, and bad filter values are 400", async () => {
    for (const body of [
      { pageSize: 0 },
      { pageSize: 101 },
      { pageNo: -1 },
      { runStatusFilter: ["DONE"] },
      { colFilters: [{ name: "nope", value: "x" }] },
      { orderBy: [{ name: "elementName" }] },
    ]) {
      const r = await runs(body);
      assert.deepEqual([r.body.status, r.body.code], [false, 400], JSON.stringify(body));
    }
  });

  it("filters and sort over HTTP", async () => {
    assert.deepEqual(
      (await runs({ quickSearch: "PLAIN-B" })).body.data.runs.map(
        (x: { runId: string }) => x.runId,
      ),
      [syncIds[1]],
    );
    const asc = await runs({
      orderBy: [{ name: "startTime", asc: true }],
      triggerFilter: ["SYNC"],
      runStatusFilter: ["SUCCESS"],
    });
    assert.deepEqual(
      asc.body.data.runs.map((x: { runId: string }) => x.runId),
      syncIds,
    );
    const none = await runs({ runStatusFilter: ["FAILURE"] });
    assert.deepEqual(
      [none.body.data.totalCount, none.body.data.totalPage, none.body.data.successCount],
      [0, 0, 3],
    );
  });

  it("locator: both folderId and path is 400; unknown element 28010001; elementId works", async () => {
    const both = await runs({ path: "/flows", folderId: "x" });
    assert.deepEqual([both.body.status, both.body.code], [false, 400]);
    assert.equal((await runs({ elementName: "nope" })).body.code, 28010001);
    const flows = (await call("GET", "/monitor/flows")).body.data;
    const byId = await runs({ elementName: undefined, elementId: flows[0].element.elementId });
    assert.equal(byId.body.data.totalCount, 3);
  });

  it("elementType PY lists script tasks", async () => {
    const r = await runs({ elementName: "echo", elementType: "PY", path: "/py" });
    assert.equal(r.body.data.totalCount, 1, r.text);
    assert.deepEqual(
      [r.body.data.runs[0].runStatus, r.body.data.runs[0].runName],
      ["SUCCESS", "echo"],
    );
  });

  it("GET /monitor/run: one run of any type; unknown run is 28020002", async () => {
    const r = await call("GET", `/monitor/run?runId=${syncIds[0]}`, undefined, {
      ...h,
      language: "en",
    });
    const d = r.body.data;
    assert.deepEqual(
      [
        d.runId,
        d.runStatus,
        d.triggerType,
        d.elementName,
        d.elementDescription,
        d.version,
        d.runName,
      ],
      [syncIds[0], "SUCCESS", "SYNC", "plain", "Plain orders", "1", "plain-a"],
    );
    assert.equal(typeof d.folderId, "string");
    const py = (await runs({ elementName: "echo", elementType: "PY" })).body.data.runs[0];
    assert.equal(
      (await call("GET", `/monitor/run?runId=${py.runId}`)).body.data.elementName,
      "echo",
    );
    const missing = await call("GET", "/monitor/run?runId=nope");
    assert.deepEqual([missing.body.status, missing.body.code], [false, 28020002]);
    assert.equal(
      (await call("GET", `/monitor/run?runId=${syncIds[0]}`, undefined, {})).body.data.runId,
      syncIds[0],
      "off mode, no headers: unscoped",
    );
  });

  it("a second space sees nothing", async () => {
    const other = scopeHeaders(OTHER_SCOPE);
    assert.deepEqual((await call("GET", "/monitor/flows", undefined, other)).body.data, []);
    assert.equal((await runs({}, other)).body.code, 28010001);
    assert.equal(
      (await call("GET", `/monitor/run?runId=${syncIds[0]}`, undefined, other)).body.code,
      28020002,
    );
    assert.deepEqual((await call("GET", "/flow/list", undefined, other)).body.data, []);
  });

  it("monitor/flows and monitor/runs require the context headers", async () => {
    assert.equal((await call("GET", "/monitor/flows", undefined, {})).body.code, 400);
    assert.equal((await runs({}, {})).body.code, 400);
  });

  it("GET /flow/list: DPL elements with inProcessCount; off mode without headers lists every scope", async () => {
    const mine = (await call("GET", "/flow/list")).body.data;
    assert.deepEqual(
      mine.map((f: { elementName: string; inProcessCount: number }) => [
        f.elementName,
        f.inProcessCount,
      ]),
      [
        ["plain", 0],
        ["quiet", 0],
      ],
    );
    assert.deepEqual(mine[0].description, { en: "Plain orders", "zh-cn": "普通订单" });
    assert.equal(mine[0].path, "/flows");
    const all = await call("GET", "/flow/list", undefined, {});
    assert.equal(all.body.data.length, 2);
  });
});

describe("GET /flow/list with a session cookie", () => {
  const ENV = {
    AUTH_MODE: "signature",
    AUTH_APP_SECRETS: "app1=s3cret",
    AUTH_SESSION_SECRET: "session-k",
  };
  let server: TestServer;
  const now = () => Math.floor(Date.now() / 1000);
  const token = (s: { app: string; space: string; user: string }) => ({
    ...s,
    token: signToken("s3cret", s, now()),
  });
  const cookie = (s: { app: string; space: string; user: string }) => ({
    cookie: `session=${makeSessionCookie("session-k", s, now() + 600)}`,
  });

  before(async () => {
    server = await startServer(ENV);
    await deployAndActivate(server, "mine", NO_SCRIPT_FLOW, {}, token(SCOPE));
    await deployAndActivate(server, "theirs", NO_SCRIPT_FLOW, {}, token(OTHER_SCOPE));
  });
  after(() => server.close());

  it("answers from the cookie's scope when headers are absent", async () => {
    const r = await server.call("GET", `${DF}/flow/list`, { headers: cookie(SCOPE) });
    assert.deepEqual(
      r.body.data.map((f: { elementName: string }) => f.elementName),
      ["mine"],
    );
    const o = await server.call("GET", `${DF}/flow/list`, { headers: cookie(OTHER_SCOPE) });
    assert.deepEqual(
      o.body.data.map((f: { elementName: string }) => f.elementName),
      ["theirs"],
    );
  });

  it("without token or cookie in signature mode: 401", async () => {
    const r = await server.call("GET", `${DF}/flow/list`);
    assert.deepEqual([r.body.code, r.body.message], [401, "UNAUTHORIZED"]);
  });
});
