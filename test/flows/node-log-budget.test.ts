import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { executeFlow, type FlowDeps, type NodeLog } from "../../src/flows/executor.ts";
import { inlineExpressions } from "../../src/flows/expr-jobs.ts";
import { sizeOf } from "../../src/flows/expr-size.ts";
import { type Graph, normalizeConfigure } from "../../src/flows/graph.ts";

/**
 * A run's node logs keep their inputs and outputs within one value's budget (valueBytes,
 * LIMIT_RESULT_BYTES; docs/flow-graph.md, "Scheduling", node logs), a resumed run's too: the
 * logs it reuses from the failed run count against its budget like the ones its nodes write.
 */
const BUDGET = 1000;
const py = (id: string) => ({ id, type: "script", config: { code: "def main(p):\n  return p\n" } });
const GRAPH = {
  vertexes: [{ id: "in", type: "input" }, py("a"), py("b"), py("c")],
  edges: [
    { source: "in", target: "a" },
    { source: "a", target: "b" },
    { source: "b", target: "c" },
  ],
} as Graph;

function deps(fail: string | undefined): FlowDeps {
  return {
    async runScript(req) {
      if (req.nodeId === fail) return { ok: false, error: "boom", stdout: "", stderr: "" };
      return { ok: true, value: { from: req.nodeId, got: req.parameter }, stdout: "", stderr: "" };
    },
    async runSubflow() {
      return { ok: true, value: null };
    },
    fetch,
    expressions: inlineExpressions(),
    valueBytes: BUDGET,
    logValueBytes: BUDGET,
    now: Date.now,
  };
}

const execute = (d: FlowDeps, reuse?: { runId: string; nodes: NodeLog[] }) =>
  executeFlow({
    runId: "r",
    graph: GRAPH,
    configure: normalizeConfigure({}),
    parameter: { s: "x".repeat(150) },
    signal: new AbortController().signal,
    deps: d,
    reuse,
  });

/** What a run's logs keep of its nodes' values, measured as the keeper measures. */
const kept = (nodes: NodeLog[]) =>
  nodes.reduce(
    (sum, n) =>
      sum +
      (n.input === undefined ? 0 : sizeOf(n.input, Infinity)) +
      (n.output === undefined ? 0 : sizeOf(n.output, Infinity)),
    0,
  );

describe("node logs within the run's budget", () => {
  it("a resumed run's logs, reused ones included, stay within the budget", async () => {
    const failed = await execute(deps("b"));
    assert.equal(failed.status, "FAILURE");
    assert.ok(kept(failed.nodes) <= BUDGET, `the failed run kept ${kept(failed.nodes)}`);
    const stored = JSON.parse(JSON.stringify(failed.nodes)) as NodeLog[];
    const resumed = await execute(deps(undefined), { runId: "old", nodes: stored });
    assert.equal(resumed.status, "SUCCESS");
    assert.equal(resumed.nodes.find((n) => n.nodeId === "a")?.reusedFrom, "old");
    assert.ok(kept(resumed.nodes) <= BUDGET, `the resumed run kept ${kept(resumed.nodes)}`);
    // What did not fit is named, as in any run.
    assert.ok(resumed.nodes.some((n) => n.omitted !== undefined));
  });

  it("a run's logs as stored JSON stay about within the budget, whatever the values hold", async () => {
    // Values whose JSON is far longer than their count of items and characters: long numbers,
    // strings of escaped characters.
    const values: [string, unknown][] = [
      ["numbers", Array.from({ length: 30 }, (_, i) => -1.234567890123456e-300 * (i + 1))],
      ["escapes", "\u0001".repeat(120)],
      ["booleans", Array(120).fill(false)],
    ];
    for (const [what, value] of values) {
      const graph = {
        vertexes: [
          { id: "in", type: "input" },
          py("s"),
          ...Array.from({ length: 10 }, (_, i) => ({
            id: `t${i}`,
            type: "transform",
            config: { operators: [{ type: "expr", expr: "$" }] },
          })),
        ],
        edges: ["in", "s", ...Array.from({ length: 10 }, (_, i) => `t${i}`)]
          .slice(1)
          .map((target, i, all) => ({ source: i === 0 ? "in" : (all[i - 1] as string), target })),
      } as Graph;
      const d: FlowDeps = {
        ...deps(undefined),
        async runScript() {
          return { ok: true, value, stdout: "", stderr: "" };
        },
      };
      const run = await executeFlow({
        runId: "r",
        graph,
        configure: normalizeConfigure({}),
        parameter: {},
        signal: new AbortController().signal,
        deps: d,
      });
      assert.equal(run.status, "SUCCESS", run.error);
      const json = (v: unknown) => (v === undefined ? 0 : JSON.stringify(v).length);
      const values = run.nodes.reduce((sum, n) => sum + json(n.input) + json(n.output), 0);
      assert.ok(
        values <= BUDGET * 1.1,
        `${what}: the run's logs hold ${values} characters of values`,
      );
    }
  });
});
