import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { executeFlow, type FlowDeps } from "../../src/flows/executor.ts";
import { inlineExpressions } from "../../src/flows/expr-jobs.ts";
import { type Graph, normalizeConfigure } from "../../src/flows/graph.ts";

/**
 * Nodes with no expression can build large values too (docs/flow-graph.md, "Node output limit"):
 * written as an attacker would deploy them. Before the limit, the join answered millions of
 * records built on the service's thread, and the merges a value of 2^40 leaves that the run's
 * records would then have written out there.
 */
const deps = (valueBytes: number): FlowDeps => ({
  async runScript() {
    return { ok: false, error: "unused", stdout: "", stderr: "" };
  },
  async runSubflow() {
    return { ok: false, error: "unused" };
  },
  fetch,
  expressions: inlineExpressions(),
  valueBytes,
  logValueBytes: valueBytes,
  now: Date.now,
});

const run = (graph: Graph, parameter: unknown, valueBytes = 1 << 20) =>
  executeFlow({
    runId: "r",
    graph,
    configure: normalizeConfigure({}),
    parameter,
    signal: new AbortController().signal,
    deps: deps(valueBytes),
  });

const pick = (id: string, expr: string) => ({
  id,
  type: "transform",
  config: { operators: [{ type: "expr", expr }] },
});

/** Layers of merges: each layer's output holds the previous one twice (by reference). */
function doubling(layers: number): Graph {
  const vertexes: Graph["vertexes"] = [{ id: "in", type: "input" }, pick("c", "1")];
  const edges: Graph["edges"] = [{ source: "in", target: "c" }];
  let prev = "in";
  for (let k = 0; k < layers; k++) {
    const [a, b, m] = [`a${k}`, `b${k}`, `m${k}`];
    vertexes.push({ id: a, type: "merge" }, { id: b, type: "merge" }, { id: m, type: "merge" });
    edges.push(
      { source: prev, target: a },
      { source: "c", target: a },
      { source: prev, target: b },
      { source: "c", target: b },
      { source: a, target: m },
      { source: b, target: m },
    );
    prev = m;
  }
  vertexes.push({ id: "out", type: "output" });
  edges.push({ source: prev, target: "out" });
  return { vertexes, edges };
}

describe("the size of a node's output", () => {
  it("stops merges that double a value layer after layer", async () => {
    const r = await run(doubling(40), { s: "x".repeat(100) });
    assert.equal(r.status, "FAILURE");
    assert.match(
      r.error ?? "",
      /ResultTooLarge: .*over the 1048576 byte limit \(LIMIT_RESULT_BYTES\)/,
    );
    assert.match(r.failedNodeId ?? "", /^m\d+$/);
  });

  it("stops a join whose every record matches every other", async () => {
    const rows = Array.from({ length: 2000 }, (_, i) => ({ k: 1, i }));
    const graph: Graph = {
      vertexes: [
        { id: "in", type: "input" },
        pick("l", "left"),
        pick("r", "right"),
        { id: "j", type: "merge", config: { mode: "join", left: "l", right: "r", on: "k" } },
        { id: "out", type: "output" },
      ],
      edges: [
        { source: "in", target: "l" },
        { source: "in", target: "r" },
        { source: "l", target: "j" },
        { source: "r", target: "j" },
        { source: "j", target: "out" },
      ],
    };
    const r = await run(graph, { left: rows, right: rows });
    assert.equal(r.status, "FAILURE");
    assert.equal(r.failedNodeId, "j");
    // Counted as it grows: the join itself stops, rather than the check of its finished output.
    assert.match(r.error ?? "", /ResultTooLarge: the join's output is over the 1048576 byte limit/);
  });

  it("lets values within the limit through", async () => {
    const r = await run(doubling(4), { s: "x" });
    assert.equal(r.status, "SUCCESS");
  });
});
