import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { DF, deployAndActivate, NO_SCRIPT_FLOW } from "../helpers/flows.ts";
import {
  OTHER_SCOPE,
  scopeHeaders,
  startServer,
  type TestServer,
  upload,
} from "../helpers/server.ts";

/**
 * Issue-14 rules that are not about a serialiser's form but about what a field means
 * (docs/errors.md "How fields are read", docs/dataflow-service.md, docs/auth.md).
 */
describe("what request fields mean", () => {
  let server: TestServer;
  const h = scopeHeaders();
  const call = (method: string, p: string, body?: unknown, headers: Record<string, string> = h) =>
    server.call(method, p, { headers, body });
  const ORDERS = { orders: [{ amount: 2, qty: 3 }] };
  const ECHO = "def main(p):\n    return {'got': p}\n";

  before(async () => {
    server = await startServer();
    await deployAndActivate(server, "rules", NO_SCRIPT_FLOW, {}, h, "/a");
    const up = await upload(server, [{ name: "echo.py", content: ECHO }], { path: "/r" });
    assert.equal(up.body.data[0].status, 0, up.text);
    await deployAndActivate(
      server,
      "echoflow",
      {
        vertexes: [
          { id: "in", type: "input" },
          { id: "py", type: "script", config: { element: { elementName: "echo", path: "/r" } } },
          { id: "out", type: "output" },
        ],
        edges: [
          { source: "in", target: "py" },
          { source: "py", target: "out" },
        ],
      },
      {},
      h,
      "/r",
    );
  });
  after(() => server.close());

  const elementIdOf = async (name: string): Promise<string> => {
    const list = await call("GET", `${DF}/flow/list`);
    const item = list.body.data.find((e: { elementName: string }) => e.elementName === name);
    assert.ok(item, list.text);
    return item.elementId as string;
  };

  it("a deploy with elementId adds a revision to that element, wherever its folder is", async () => {
    const id = await elementIdOf("rules");
    const d = await call("POST", `${DF}/flow/deploy`, {
      elementName: "rules",
      elementId: id,
      revisionName: "r2",
      flow: NO_SCRIPT_FLOW,
      configure: {},
    });
    assert.equal(d.body.status, true, d.text);
    const list = await call("GET", `${DF}/flow/list`);
    const named = list.body.data.filter((e: { elementName: string }) => e.elementName === "rules");
    assert.equal(named.length, 1, "no second element at /");
    assert.equal(named[0].path, "/a");
    const byName = await call("POST", `${DF}/run-sync`, {
      elementName: "rules",
      parameter: ORDERS,
    });
    assert.equal(
      byName.body.status,
      true,
      `a name-only call still finds one element: ${byName.text}`,
    );
    const monitor = await call("GET", `${DF}/monitor/flows`);
    const flow = monitor.body.data.find(
      (f: { element: { elementName: string } }) => f.element.elementName === "rules",
    );
    assert.equal(flow.revision.name, "r2");
  });

  it("a deploy whose elementId and name or folder disagree is a 400 saying which", async () => {
    const id = await elementIdOf("rules");
    const base = { revisionName: "r3", flow: NO_SCRIPT_FLOW, configure: {} };
    const name = await call("POST", `${DF}/flow/deploy`, {
      ...base,
      elementId: id,
      elementName: "x",
    });
    assert.equal(name.body.code, 400, name.text);
    assert.match(name.body.message, /elementName "x" does not match element/);
    const path = await call("POST", `${DF}/flow/deploy`, {
      ...base,
      elementId: id,
      elementName: "rules",
      path: "/elsewhere",
    });
    assert.equal(path.body.code, 400, path.text);
    assert.match(path.body.message, /path "\/elsewhere" is not the folder of element/);
    const unknown = await call("POST", `${DF}/flow/deploy`, {
      ...base,
      elementId: "999999",
      elementName: "rules",
    });
    assert.equal(unknown.body.code, 28010001, unknown.text);
  });

  it("parentRunId must name a run of the caller's scope; an empty one is no parent", async () => {
    const parent = await call("POST", `${DF}/run`, { elementName: "rules", parameter: ORDERS });
    const parentId = parent.body.data as string;
    const child = await call("POST", `${DF}/run`, {
      elementName: "rules",
      parameter: ORDERS,
      parentRunId: parentId,
    });
    assert.equal(child.body.status, true, child.text);
    const other = scopeHeaders(OTHER_SCOPE);
    await deployAndActivate(server, "rules", NO_SCRIPT_FLOW, {}, other, "/a");
    const foreign = await call(
      "POST",
      `${DF}/run-sync`,
      { elementName: "rules", parameter: ORDERS, parentRunId: parentId },
      other,
    );
    assert.equal(foreign.body.code, 400, foreign.text);
    assert.match(foreign.body.message, /parentRunId/);
    const none = await call("POST", `${DF}/run-sync`, {
      elementName: "rules",
      parameter: ORDERS,
      parentRunId: "no-such-run",
    });
    assert.equal(none.body.code, 400, none.text);
    const empty = await call("POST", `${DF}/run`, {
      elementName: "rules",
      parameter: ORDERS,
      parentRunId: "",
    });
    assert.equal(empty.body.status, true, empty.text);
    const detail = await call("GET", `${DF}/monitor/run?runId=${empty.body.data}`);
    const childDetail = await call("GET", `${DF}/monitor/run?runId=${child.body.data}`);
    assert.equal(detail.body.data.triggerType, "ASYNC", detail.text);
    assert.equal(childDetail.body.data.triggerType, "API", childDetail.text);
  });

  it("a missing parameter is {} for a direct script run and the same script in a flow", async () => {
    const direct = await call("POST", "/script/script/run-sync", { elementName: "echo" });
    assert.deepEqual(direct.body.data, { got: {} }, direct.text);
    const nulled = await call("POST", "/script/script/run-sync", {
      elementName: "echo",
      parameter: null,
    });
    assert.deepEqual(nulled.body.data, { got: {} }, nulled.text);
    const flow = await call("POST", `${DF}/run-sync`, { elementName: "echoflow" });
    assert.deepEqual(flow.body.data, { got: {} }, flow.text);
    const flowNull = await call("POST", `${DF}/run-sync`, {
      elementName: "echoflow",
      parameter: null,
    });
    assert.deepEqual(flowNull.body.data, { got: {} }, flowNull.text);
  });

  it("script endpoints without scope headers get one error naming every missing header", async () => {
    for (const p of ["/script/script/run-sync", "/script/external/echo/run-sync"]) {
      const r = await call("POST", p, {}, {});
      assert.equal(r.body.code, 400, r.text);
      assert.match(r.body.message, /headers app, space are required/, r.text);
    }
    const flowRun = await call("POST", `${DF}/run`, { elementName: "rules" }, { app: "app1" });
    assert.match(flowRun.body.message, /headers space, user are required/, flowRun.text);
  });

  it("/flow/list without scope (auth off) says each item's app and space", async () => {
    const all = await call("GET", `${DF}/flow/list`, undefined, {});
    const rules = all.body.data.filter((e: { elementName: string }) => e.elementName === "rules");
    assert.deepEqual(
      rules.map((e: { app: string; space: string }) => `${e.app}/${e.space}`).sort(),
      ["app1/space1", "app1/space2"],
      all.text,
    );
    const scoped = await call("GET", `${DF}/flow/list`);
    for (const item of scoped.body.data)
      assert.equal(item.app, undefined, "scoped items stay as the interface says");
  });

  it("timeout 0 is no timeout: run-sync waits for the end, a result lookup answers at once", async () => {
    const sync = await call("POST", `${DF}/run-sync`, {
      elementName: "rules",
      parameter: ORDERS,
      timeout: 0,
    });
    assert.equal(sync.body.status, true, sync.text);
    const script = await call("POST", "/script/script/run-sync", {
      elementName: "echo",
      parameter: { a: 1 },
      timeout: 0,
      terminateOnTimeout: true,
    });
    assert.deepEqual(script.body.data, { got: { a: 1 } }, script.text);
    const negative = await call("POST", `${DF}/run-sync`, { elementName: "rules", timeout: -1 });
    assert.equal(negative.body.code, 400, negative.text);
  });

  it("column filters and sorting take every column a run list shows", async () => {
    const runs = (body: Record<string, unknown>) =>
      call("POST", `${DF}/monitor/runs`, {
        elementName: "rules",
        path: "/a",
        pageNo: 0,
        pageSize: 100,
        ...body,
      });
    const all = await runs({});
    type Row = { runId: string; triggerType: string; runStatus: string; summary?: string };
    const rows: Row[] = all.body.data.runs;
    assert.ok(
      rows.some((r) => r.triggerType === "SYNC") && rows.some((r) => r.triggerType !== "SYNC"),
    );
    const sync = await runs({ colFilters: [{ name: "triggerType", value: "SYNC", op: "eq" }] });
    assert.deepEqual(
      sync.body.data.runs.map((r: Row) => r.runId).sort(),
      rows
        .filter((r) => r.triggerType === "SYNC")
        .map((r) => r.runId)
        .sort(),
      sync.text,
    );
    const success = await runs({
      colFilters: [{ name: "runStatus", value: "succ", op: "prefix" }],
    });
    assert.equal(
      success.body.data.runs.length,
      rows.filter((r) => r.runStatus === "SUCCESS").length,
      success.text,
    );
    const summary = await runs({ colFilters: [{ name: "summary", value: "nodes" }] });
    assert.equal(
      summary.body.data.runs.length,
      rows.filter((r) => r.summary?.includes("nodes")).length,
      summary.text,
    );
    const sorted = await runs({ orderBy: [{ name: "summary", asc: false }] });
    const texts = sorted.body.data.runs.map((r: Row) => r.summary ?? "");
    assert.deepEqual(texts, [...texts].sort().reverse(), sorted.text);
  });

  it("a graph and configure built from classes (every unset field null) deploys and runs", async () => {
    const locator = {
      elementName: "echo",
      elementType: null,
      folderId: null,
      path: "/r",
      elementId: null,
    };
    const vertex = {
      name: null,
      retries: null,
      retryDelayMs: null,
      timeoutSeconds: null,
      continueOnError: null,
    };
    const d = await call("POST", `${DF}/flow/deploy`, {
      elementName: "classy",
      revisionName: "r1",
      path: "/r",
      flow: {
        vertexes: [
          { id: "in", type: "input", config: null, ...vertex },
          { id: "py", type: "script", config: { element: locator, code: null }, ...vertex },
          {
            id: "t",
            type: "transform",
            config: { operators: [{ id: "e", type: "expr", expr: "got" }] },
            ...vertex,
          },
          { id: "out", type: "output", config: null, ...vertex },
        ],
        edges: [
          { id: null, source: "in", target: "py", when: null },
          { id: null, source: "py", target: "t", when: null },
          { id: null, source: "t", target: "out", when: null },
        ],
      },
      configure: {
        triggers: [{ type: "manual", name: null }],
        errorHandlers: { email: null, bot: null, custom: null },
        runTimeout: { type: "system", seconds: null },
        fileCleanup: null,
        prelude: null,
        runNameTemplate: null,
        logContent: null,
      },
    });
    assert.equal(d.body.status, true, d.text);
    assert.deepEqual(d.body.data, [], d.text);
    await call("POST", `${DF}/flow/activate`, { elementName: "classy", path: "/r" });
    const run = await call("POST", `${DF}/run-sync`, {
      elementName: "classy",
      parameter: { k: 1 },
    });
    assert.deepEqual(run.body.data, { k: 1 }, run.text);
    const el = await server.services.store.findElements(
      { app: h.app, space: h.space },
      { type: "DPL", name: "classy" },
    );
    const rev = await server.services.store.flowRevision(el[0]?.id ?? "", 1);
    assert.ok(!JSON.stringify(rev?.flow).includes("null"), "stored without the nulls");
  });

  it("an unknown vertex type is one error for that vertex, not also errors about its edges", async () => {
    const d = await call("POST", `${DF}/flow/deploy`, {
      elementName: "badtype",
      revisionName: "r1",
      flow: {
        vertexes: [
          { id: "in", type: "input" },
          { id: "x", type: "nosuchtype" },
          { id: "out", type: "output" },
        ],
        edges: [
          { source: "in", target: "x" },
          { source: "x", target: "out" },
        ],
      },
      configure: {},
    });
    assert.equal(d.body.status, true, d.text);
    assert.equal(d.body.data.length, 1, d.text);
    assert.equal(d.body.data[0].nodeId, "x");
    assert.match(d.body.data[0].errorMessage, /unknown node type "nosuchtype"/);
  });
});
