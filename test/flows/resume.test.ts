import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { executeFlow, type FlowDeps, type NodeLog } from "../../src/flows/executor.ts";
import { inlineExpressions } from "../../src/flows/expr-jobs.ts";
import { type Graph, normalizeConfigure } from "../../src/flows/graph.ts";

type ScriptReq = Parameters<FlowDeps["runScript"]>[0];

/** Script nodes answer by node ID; every call is recorded. */
function deps(fail: Set<string>): FlowDeps & { calls: string[] } {
  const calls: string[] = [];
  return {
    calls,
    async runScript(req: ScriptReq) {
      calls.push(req.nodeId);
      if (fail.has(req.nodeId)) return { ok: false, error: "boom", stdout: "", stderr: "" };
      return { ok: true, value: { from: req.nodeId, got: req.parameter }, stdout: "", stderr: "" };
    },
    async runSubflow() {
      return { ok: true, value: null };
    },
    fetch,
    expressions: inlineExpressions(),
    valueBytes: 1024,
    logValueBytes: 1024,
    now: Date.now,
  };
}

const py = (id: string) => ({ id, type: "script", config: { code: "def main(p):\n  return p\n" } });

// in → a → b → c, and in → side (a branch that succeeds beside the failure), a → gate (when).
const GRAPH = {
  vertexes: [{ id: "in", type: "input" }, py("a"), py("b"), py("c"), py("side"), py("gate")],
  edges: [
    { source: "in", target: "a" },
    { source: "a", target: "b" },
    { source: "b", target: "c" },
    { source: "in", target: "side" },
    { source: "a", target: "gate", when: "from = 'nope'" },
  ],
} as Graph;

const execute = (d: FlowDeps, reuse?: { runId: string; nodes: NodeLog[] }) =>
  executeFlow({
    runId: "r",
    graph: GRAPH,
    configure: normalizeConfigure({}),
    parameter: { p: 1 },
    signal: new AbortController().signal,
    deps: d,
    reuse,
  });

describe("resume: the executor reuses recorded outputs (docs/dataflow-service.md)", () => {
  it("runs only what did not succeed; reused outputs feed the rest; when edges are evaluated again", async () => {
    const first = deps(new Set(["b"]));
    const failed = await execute(first);
    assert.equal(failed.status, "FAILURE");
    assert.equal(failed.failedNodeId, "b");
    const byId = (nodes: NodeLog[], id: string) => nodes.find((n) => n.nodeId === id);
    assert.equal(byId(failed.nodes, "gate")?.status, "SKIPPED");
    // The logs as stored (JSON), as a resume reads them back.
    const stored = JSON.parse(JSON.stringify(failed.nodes)) as NodeLog[];

    const second = deps(new Set());
    const resumed = await execute(second, { runId: "old", nodes: stored });
    assert.equal(resumed.status, "SUCCESS");
    assert.deepEqual(second.calls.sort(), ["b", "c"], "a and side are not called again");
    assert.deepEqual(byId(resumed.nodes, "b")?.status, "SUCCESS");
    assert.deepEqual(byId(resumed.nodes, "a")?.reusedFrom, "old");
    assert.equal(byId(resumed.nodes, "gate")?.status, "SKIPPED", "its edge stays untaken");
    assert.deepEqual(
      (resumed.result as Record<string, { got: unknown }>).c?.got,
      { from: "b", got: { from: "a", got: { p: 1 } } },
      "b got a's recorded output",
    );
  });

  it("a succeeded node downstream of one that runs again runs again", async () => {
    const logs = (await execute(deps(new Set()))).nodes.map((n) =>
      n.nodeId === "a" ? { ...n, status: "FAILURE" as const } : n,
    );
    const again = deps(new Set());
    await execute(again, { runId: "old", nodes: logs });
    assert.deepEqual(again.calls.sort(), ["a", "b", "c"]);
  });
});
