import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { DF } from "../helpers/flows.ts";
import { type Hook, startHook } from "../helpers/hook.ts";
import { scopeHeaders, startServer, type TestServer, upload } from "../helpers/server.ts";

/**
 * A re-run or resume repeats the script versions the old run executed, not what the revision pins
 * now; a node the old run never reached runs today's pin; a re-run task runs the version the old
 * task ran (docs/dataflow-service.md, "Re-run and resume").
 */
const scoreV = (n: number) => `def main(p):\n    return {'score': ${n}}\n`;
const script = (id: string, name: string) => ({
  id,
  type: "script",
  config: { element: { elementName: name, path: "/rv" } },
});
const http = (hook: Hook) => ({ id: "flaky", type: "http", config: { url: `${hook.url}/flaky` } });
const line = (...vertexes: { id: string }[]) => ({
  vertexes: [{ id: "in", type: "input" }, ...vertexes, { id: "out", type: "output" }],
  edges: ["in", ...vertexes.map((v) => v.id), "out"]
    .slice(1)
    .map((target, i, all) => ({ source: i === 0 ? "in" : (all[i - 1] as string), target })),
});

interface Use {
  nodeId: string;
  version: number;
  pinned: boolean;
}

describe("re-run and resume repeat script versions", () => {
  let server: TestServer;
  const h = scopeHeaders();
  const df = (p: string, body?: unknown) => server.call("POST", DF + p, { headers: h, body });
  const uploadScore = async (name: string, n: number, overwrite = false) => {
    const r = await upload(server, [{ name: `${name}.py`, content: scoreV(n) }], {
      path: "/rv",
      ...(overwrite ? { overwrite: "true" } : {}),
    });
    assert.equal(r.body.data[0].status, 0, r.text);
  };
  const release = async (name: string, flow?: unknown) => {
    if (flow) {
      const d = await df("/flow/deploy", {
        elementName: name,
        revisionName: "r1",
        path: "/rv",
        flow,
        configure: {},
      });
      assert.equal(d.body.status, true, d.text);
    }
    const a = await df("/flow/activate", { elementName: name, path: "/rv" });
    assert.equal(a.body.data, "APPROVED", a.text);
  };
  const run = async (name: string) => {
    const r = await df("/run-sync", { elementName: name, path: "/rv", parameter: {} });
    return { body: r.body, runId: r.headers.get("x-run-id") ?? "" };
  };
  const detail = async (runId: string) =>
    (await server.call("GET", `${DF}/monitor/run-detail?runId=${runId}`, { headers: h })).body.data;
  const uses = async (runId: string) =>
    ((await detail(runId)).scripts as Use[]).map((u) => [u.nodeId, u.version, u.pinned]);

  before(async () => {
    server = await startServer();
  });
  after(() => server.close());

  it("a re-run of a flow run runs the script version the run ran, after a re-pin", async () => {
    await uploadScore("s1", 1);
    await release("f1", line(script("score", "s1")));
    const first = await run("f1");
    assert.deepEqual(first.body.data, { score: 1 });
    await uploadScore("s1", 2, true);
    await release("f1"); // re-pins version 2
    assert.deepEqual((await run("f1")).body.data, { score: 2 });

    const rr = await df(`/run/${first.runId}/rerun`, { sync: true });
    assert.deepEqual(rr.body.data, { score: 1 }, rr.text);
    const rrId = rr.headers.get("x-run-id") ?? "";
    assert.deepEqual(await uses(rrId), [["score", 1, true]]);
    // A re-run of the re-run repeats the same version.
    const again = await df(`/run/${rrId}/rerun`, { sync: true });
    assert.deepEqual(again.body.data, { score: 1 });
  });

  it("a resume reuses and re-runs with the failed run's versions; unreached nodes run today's pin", async () => {
    const hook = await startHook();
    try {
      await uploadScore("s2", 1);
      await uploadScore("s3", 1);
      // score ran (version 1) before flaky failed; late was never reached.
      await release("f2", line(script("score", "s2"), http(hook), script("late", "s3")));
      const failed = await run("f2");
      assert.equal(failed.body.code, 28020004, JSON.stringify(failed.body));
      assert.deepEqual(await uses(failed.runId), [["score", 1, true]]);
      await uploadScore("s2", 2, true);
      await uploadScore("s3", 2, true);
      await release("f2");
      hook.healFlaky();

      const resumed = await df(`/run/${failed.runId}/resume`, { sync: true });
      assert.deepEqual(resumed.body.data, { score: 2 }, resumed.text);
      const resumedId = resumed.headers.get("x-run-id") ?? "";
      // score was reused (its version 1 listed first), late ran the version pinned now.
      assert.deepEqual(await uses(resumedId), [
        ["score", 1, true],
        ["late", 2, true],
      ]);
      // A re-run of the failed run executes score again, at the version the failed run ran.
      const rr = await df(`/run/${failed.runId}/rerun`, { sync: true });
      const rrId = rr.headers.get("x-run-id") ?? "";
      const nodes = (await detail(rrId)).nodes as { nodeId: string; output?: unknown }[];
      assert.deepEqual(nodes.find((n) => n.nodeId === "score")?.output, { score: 1 });
      assert.deepEqual(await uses(rrId), [
        ["score", 1, true],
        ["late", 2, true],
      ]);
    } finally {
      await hook.close();
    }
  });

  it("a re-run of a script task runs the version the task ran", async () => {
    await uploadScore("t1", 1);
    const sc = (p: string, body: unknown) =>
      server.call("POST", `${server.config.scriptPrefix}${p}`, { headers: h, body });
    const t = await sc("/script/run-sync", { elementName: "t1", path: "/rv", parameter: {} });
    assert.deepEqual(t.body.data, { score: 1 });
    const taskId = t.headers.get("x-task-id") ?? "";
    await uploadScore("t1", 2, true);
    const rr = await df(`/run/${taskId}/rerun`, { sync: true });
    assert.deepEqual(rr.body.data, { score: 1 }, rr.text);
    const run = await server.services.store.getRun(null, rr.headers.get("x-task-id") ?? "");
    assert.deepEqual([run?.version, run?.rerunOf?.runId], ["1", taskId]);
    // A new task runs the newest.
    const fresh = await sc("/script/run-sync", { elementName: "t1", path: "/rv", parameter: {} });
    assert.deepEqual(fresh.body.data, { score: 2 });
  });
});
