import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { DF, deployAndActivate, NO_SCRIPT_FLOW } from "../helpers/flows.ts";
import { scopeHeaders, startServer, type TestServer } from "../helpers/server.ts";

const SLEEPER = {
  vertexes: [
    { id: "in", type: "input" },
    {
      id: "py",
      type: "script",
      config: { code: "import time\ndef main(p):\n    time.sleep(30)\n" },
    },
  ],
  edges: [{ source: "in", target: "py" }],
};

describe("data-flow error codes", () => {
  let server: TestServer;
  const h = scopeHeaders();
  const call = (p: string, body: unknown, headers: Record<string, string> = h) =>
    server.call("POST", DF + p, { headers, body });
  before(async () => {
    // One flow slot and a queue bound of 2: the third waiting run is refused.
    server = await startServer({
      FLOW_CONCURRENCY: "1",
      LIMIT_QUEUED_RUNS: "2",
      LIMIT_QUEUED_RUNS_PER_APP: "2",
      LIMIT_RESULT_BYTES: "200",
    });
    await deployAndActivate(server, "sleeper", SLEEPER);
    await deployAndActivate(server, "twin", NO_SCRIPT_FLOW, {}, h, "/a");
    await deployAndActivate(server, "twin", NO_SCRIPT_FLOW, {}, h, "/b");
  });
  after(() => server.close());

  it("429 once the queue bound is reached; accepted runs stay", async () => {
    const ids: string[] = [];
    for (let i = 0; i < 3; i++)
      ids.push((await call("/run", { elementName: "sleeper", parameter: {} })).body.data);
    // One runs, two wait: the bound is full.
    const refused = await call("/run", { elementName: "sleeper", parameter: {} });
    assert.deepEqual([refused.body.status, refused.body.code], [false, 429]);
    const t = await call("/run/terminate", { runIds: ids });
    assert.deepEqual(Object.values(t.body.data), [true, true, true]);
  });

  it("28010002 when a flow name is not unique, resolved by path", async () => {
    const r = await call("/run-sync", { elementName: "twin", parameter: { orders: [] } });
    assert.equal(r.body.code, 28010002);
    const ok = await call("/run-sync", {
      elementName: "twin",
      path: "/b",
      parameter: { orders: [] },
    });
    assert.equal(ok.body.status, true);
  });

  it("28010003 for an unknown folderId on deploy and run", async () => {
    const d = await call("/flow/deploy", {
      elementName: "x",
      revisionName: "r",
      folderId: "nope",
      flow: NO_SCRIPT_FLOW,
      configure: {},
    });
    assert.equal(d.body.code, 28010003);
    const r = await call("/run", { elementName: "twin", folderId: "nope" });
    assert.equal(r.body.code, 28010003);
  });

  it("28020002 for an unknown run; messages in Chinese with language: zh-cn", async () => {
    const r = await server.call("GET", `${DF}/run/nope/result`, {
      headers: { ...h, language: "zh-cn" },
    });
    assert.equal(r.body.code, 28020002);
    assert.match(r.body.message, /运行记录不存在/);
    const en = await server.call("GET", `${DF}/run/nope/result`, { headers: h });
    assert.match(en.body.message, /run does not exist/);
  });

  it("a result over the size limit fails the run, naming the limit", async () => {
    const big = { orders: Array.from({ length: 20 }, (_, i) => ({ amount: i + 1, qty: 1 })) };
    const r = await call("/run-sync", { elementName: "twin", path: "/a", parameter: big });
    assert.equal(r.body.code, 28020004);
    assert.match(r.body.message, /over the 200 byte limit/);
  });

  it("a request carrying parentRunId is trigger API and names its parent", async () => {
    const parent = await call("/run-sync", {
      elementName: "twin",
      path: "/a",
      parameter: { orders: [] },
    });
    const parentId = parent.headers.get("x-run-id") ?? "";
    const child = await call("/run-sync", {
      elementName: "twin",
      path: "/a",
      parameter: { orders: [] },
      parentRunId: parentId,
    });
    const run = await server.services.store.getRun(null, child.headers.get("x-run-id") ?? "");
    assert.deepEqual([run?.triggerType, run?.parentRunId], ["API", parentId]);
  });

  it("400 for a run request naming neither elementName nor elementId", async () => {
    const r = await call("/run", { parameter: {} });
    assert.deepEqual(
      [r.body.code, /elementName or body.elementId/.test(r.body.message)],
      [400, true],
    );
  });
});
