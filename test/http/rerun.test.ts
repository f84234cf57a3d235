import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { DF, deployAndActivate, NO_SCRIPT_FLOW } from "../helpers/flows.ts";
import { type Hook, startHook } from "../helpers/hook.ts";
import {
  OTHER_SCOPE,
  scopeHeaders,
  startServer,
  type TestServer,
  upload,
} from "../helpers/server.ts";

const ORDERS = { orders: [{ amount: 2, qty: 3 }] };

/** in → count (http, the side effect) → flaky (http, fails until healed) → out. */
function chain(hookUrl: string) {
  return {
    vertexes: [
      { id: "in", type: "input" },
      { id: "count", type: "http", config: { method: "POST", url: `${hookUrl}/count`, body: {} } },
      { id: "flaky", type: "http", config: { url: `${hookUrl}/flaky` } },
      {
        id: "both",
        type: "transform",
        config: { operators: [{ id: "e", type: "expr", expr: "{'flaky': path}" }] },
      },
      { id: "out", type: "output" },
    ],
    edges: [
      { source: "in", target: "count" },
      { source: "count", target: "flaky" },
      { source: "flaky", target: "both" },
      { source: "both", target: "out" },
    ],
  };
}

describe("re-run and resume", () => {
  let server: TestServer;
  let hook: Hook;
  const h = scopeHeaders();
  const other = scopeHeaders(OTHER_SCOPE);
  const call = (method: string, p: string, body?: unknown, headers: Record<string, string> = h) =>
    server.call(method, DF + p, { headers, body });
  const result = (id: string) => call("GET", `/run/${id}/result?timeout=60`);
  const detail = async (id: string) =>
    (await call("GET", `/monitor/run-detail?runId=${id}`)).body.data;

  before(async () => {
    server = await startServer();
    hook = await startHook();
    await deployAndActivate(server, "plain", NO_SCRIPT_FLOW);
    await deployAndActivate(server, "chain", chain(hook.url));
    await deployAndActivate(server, "concise", chain(hook.url), { logContent: "CONCISE" });
    await deployAndActivate(server, "hang", {
      vertexes: [
        { id: "in", type: "input" },
        { id: "wait", type: "http", config: { url: `${hook.url}/hang` } },
      ],
      edges: [{ source: "in", target: "wait" }],
    });
    await upload(
      server,
      [{ name: "double.py", content: "def main(p):\n    return p['n'] * 2\n" }],
      {
        path: "/py",
      },
    );
  });
  after(async () => {
    await server.close();
    await hook.close();
  });

  it("resume runs only the failed node and what follows: the succeeded node's side effect happens once", async () => {
    const start = await call("POST", "/run", { elementName: "chain", parameter: {} });
    const failedId = start.body.data as string;
    const failed = await result(failedId);
    assert.equal(failed.body.code, 28020004);
    assert.match(failed.body.message, /^flaky: HTTP 500/);
    assert.deepEqual([hook.calls("/count"), hook.calls("/flaky")], [1, 1]);

    hook.healFlaky();
    const resumed = await call("POST", `/run/${failedId}/resume`, {});
    assert.equal(resumed.body.code, 0, resumed.text);
    const newId = resumed.body.data as string;
    assert.equal(resumed.headers.get("x-run-id"), newId);
    assert.notEqual(newId, failedId);
    const done = await result(newId);
    assert.deepEqual(done.body.data, { flaky: "/flaky" });
    // The count node was not called again; the failed node was.
    assert.deepEqual([hook.calls("/count"), hook.calls("/flaky")], [1, 2]);

    const shown = await call("GET", `/monitor/run?runId=${newId}`);
    assert.deepEqual(shown.body.data.rerunOf, { runId: failedId, kind: "resume" });
    assert.equal(shown.body.data.version, "1");
    const nodes = (await detail(newId)).nodes as { nodeId: string; reusedFrom?: string }[];
    assert.deepEqual(
      nodes.map((n) => [n.nodeId, n.reusedFrom ?? null]),
      [
        ["in", failedId],
        ["count", failedId],
        ["flaky", null],
        ["both", null],
        ["out", null],
      ],
    );
    // The failed run is left as it was; the succeeded resume is not resumable.
    assert.equal((await detail(failedId)).resumable, true);
    assert.equal((await detail(newId)).resumable, false);
    const again = await call("POST", `/run/${newId}/resume`, {});
    assert.equal(again.body.code, 28020008);
    assert.match(again.body.message, /only a FAILURE run resumes \(status SUCCESS\)/);
  });

  it("resume with sync waits like run-sync and answers the result", async () => {
    const h3 = await startHook();
    try {
      await deployAndActivate(server, "chain3", chain(h3.url));
      const failedId = (await call("POST", "/run", { elementName: "chain3", parameter: {} })).body
        .data as string;
      assert.equal((await result(failedId)).body.code, 28020004);
      h3.healFlaky();
      const r = await call("POST", `/run/${failedId}/resume`, { sync: true });
      assert.deepEqual(r.body.data, { flaky: "/flaky" }, r.text);
      assert.ok(r.headers.get("x-run-id"));
      assert.deepEqual([h3.calls("/count"), h3.calls("/flaky")], [1, 2]);
    } finally {
      await h3.close();
    }
  });

  it("refuses to resume a run whose outputs were not kept, saying so, and writes nothing", async () => {
    const h2 = await startHook();
    try {
      await deployAndActivate(server, "concise2", chain(h2.url), { logContent: "CONCISE" });
      const failedId = (await call("POST", "/run", { elementName: "concise2", parameter: {} })).body
        .data as string;
      assert.equal((await result(failedId)).body.code, 28020004);
      const r = await call("POST", `/run/${failedId}/resume`, { sync: true });
      assert.equal(r.body.code, 28020008);
      assert.match(r.body.message, /outputs of its nodes were not kept.*logContent is CONCISE/);
      assert.equal((await detail(failedId)).resumable, false);
      const runs = await call("POST", "/monitor/runs", {
        elementName: "concise2",
        pageNo: 0,
        pageSize: 10,
      });
      assert.equal(runs.body.data.totalCount, 1, "the refused resume wrote no run");
      // No body at all is the same as {}.
      const bare = await server.call("POST", `${DF}/run/${failedId}/resume`, { headers: h });
      assert.equal(bare.body.code, 28020008, bare.text);
      // A re-run is still possible, and repeats every node.
      h2.healFlaky();
      const rr = await call("POST", `/run/${failedId}/rerun`, { sync: true });
      assert.deepEqual(rr.body.data, { flaky: "/flaky" });
      assert.equal(h2.calls("/count"), 2);
    } finally {
      await h2.close();
    }
  });

  it("re-run repeats the parameter and the revision, even after a new release", async () => {
    const first = await call("POST", "/run-sync", { elementName: "plain", parameter: ORDERS });
    const firstId = first.headers.get("x-run-id") ?? "";
    // A new revision changes the result; the re-run keeps revision 1.
    const v2 = JSON.parse(
      JSON.stringify(NO_SCRIPT_FLOW).replace('"amount * qty"', '"amount * qty * 100"'),
    );
    const d = await call("POST", "/flow/deploy", {
      elementName: "plain",
      revisionName: "r2",
      path: "/flows",
      flow: v2,
      configure: {},
    });
    assert.equal(d.body.code, 0);
    assert.deepEqual(
      (await call("POST", "/run-sync", { elementName: "plain", parameter: ORDERS })).body.data,
      [{ amount: 2, qty: 3, total: 600 }],
    );
    const rr = await call("POST", `/run/${firstId}/rerun`, { sync: true });
    assert.deepEqual(rr.body.data, first.body.data);
    const rrId = rr.headers.get("x-run-id") ?? "";
    const run = await server.services.store.getRun(null, rrId);
    assert.deepEqual(
      [run?.version, run?.runParam, run?.triggerType, run?.rerunOf],
      ["1", JSON.stringify(ORDERS), "SYNC", { runId: firstId, kind: "rerun" }],
    );
    // Async: answers the new run's ID with x-run-id.
    const async = await call("POST", `/run/${firstId}/rerun`, {});
    assert.equal(async.headers.get("x-run-id"), async.body.data);
    assert.deepEqual((await result(async.body.data)).body.data, first.body.data);
    const shown = await call("GET", `/monitor/run?runId=${async.body.data}`);
    assert.deepEqual(shown.body.data.rerunOf, { runId: firstId, kind: "rerun" });
    assert.equal(shown.body.data.triggerType, "ASYNC");
  });

  it("re-runs a script task with the same parameter", async () => {
    const t = await server.call("POST", "/script/script/run-sync", {
      headers: h,
      body: { elementName: "double", path: "/py", parameter: { n: 21 } },
    });
    assert.equal(t.body.data, 42);
    const taskId = t.headers.get("x-task-id") ?? "";
    const rr = await call("POST", `/run/${taskId}/rerun`, { sync: true });
    assert.equal(rr.body.data, 42, rr.text);
    const newId = rr.headers.get("x-task-id") ?? "";
    assert.equal(rr.headers.get("x-task-status"), "SUCCESS");
    const run = await server.services.store.getRun(null, newId);
    assert.deepEqual(
      [run?.elementType, run?.runParam, run?.rerunOf],
      ["PY", JSON.stringify({ n: 21 }), { runId: taskId, kind: "rerun" }],
    );
    const asyncId = (await call("POST", `/run/${taskId}/rerun`, {})).body.data as string;
    const lifespan = await server.call("GET", `/script/script/lifespan/${asyncId}?timeout=60`, {
      headers: h,
    });
    assert.equal(lifespan.body.data.retval, 42);
    const resume = await call("POST", `/run/${taskId}/resume`, {});
    assert.equal(resume.body.code, 28020008);
    assert.match(resume.body.message, /only a flow run resumes/);
  });

  it("a deactivated flow does not re-run (as it does not run)", async () => {
    await deployAndActivate(server, "brief", NO_SCRIPT_FLOW);
    const id = (
      await call("POST", "/run-sync", { elementName: "brief", parameter: ORDERS })
    ).headers.get("x-run-id") as string;
    const off = await call("POST", "/flow/deactivate", { elementName: "brief", path: "/flows" });
    assert.equal(off.body.data, "OBSOLETE");
    const r = await call("POST", `/run/${id}/rerun`, { sync: true });
    assert.equal(r.body.code, 28020001);
    assert.match(r.body.message, /status OBSOLETE/);
  });

  it("refuses to re-run or resume a run that has not finished", async () => {
    const id = (await call("POST", "/run", { elementName: "hang", parameter: {} })).body
      .data as string;
    await hook.reached("/hang", 1);
    for (const kind of ["rerun", "resume"]) {
      const r = await call("POST", `/run/${id}/${kind}`, {});
      assert.equal(r.body.code, 28020007, r.text);
      assert.match(r.body.message, /has not finished \(status STARTED\)/);
    }
    hook.release();
    assert.equal((await result(id)).body.code, 0);
  });

  it("another scope's runs answer as not existing; the scope headers are required", async () => {
    const id = (
      await call("POST", "/run-sync", { elementName: "plain", parameter: ORDERS })
    ).headers.get("x-run-id") as string;
    for (const kind of ["rerun", "resume"]) {
      const r = await call("POST", `/run/${id}/${kind}`, {}, other);
      assert.equal(r.body.code, 28020002, r.text);
      const bare = await call("POST", `/run/${id}/${kind}`, {}, {});
      assert.equal(bare.body.code, 400);
      const unknown = await call("POST", `/run/nope/${kind}`, {});
      assert.equal(unknown.body.code, 28020002);
    }
  });
});
