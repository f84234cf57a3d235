import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { DF, deployAndActivate } from "../helpers/flows.ts";
import { scopeHeaders, startServer, type TestServer } from "../helpers/server.ts";

/**
 * A run keeps each node's input and output in its node logs (logContent DETAILED, the default):
 * written as an attacker would, a chain of nodes that pass a large parameter along made one run
 * store its parameter twice per node (829 MiB for 100 nodes and 2 MiB) and grow the service's
 * memory by gigabytes while the record was written (docs/flow-graph.md, "Scheduling", node logs).
 */
const NODES = 40;
const MiB = 1024 * 1024;

/** input → NODES identity transforms → output, the last failing when the parameter says so. */
function chain() {
  const ids = Array.from({ length: NODES }, (_, i) => `t${i}`);
  const vertexes = [
    { id: "in", type: "input" },
    ...ids.map((id) => ({
      id,
      type: "transform",
      config: { operators: [{ type: "expr", expr: "$" }] },
    })),
    {
      id: "last",
      type: "transform",
      config: { operators: [{ type: "expr", expr: "fail ? $error('told to fail') : 'ok'" }] },
    },
  ];
  const order = ["in", ...ids, "last"];
  const edges = order.slice(1).map((id, i) => ({ source: order[i] as string, target: id }));
  return { vertexes, edges };
}

describe("what a run keeps of its nodes' data", () => {
  let server: TestServer;
  const h = scopeHeaders();
  before(async () => {
    server = await startServer();
    await deployAndActivate(server, "chain", chain());
  });
  after(() => server.close());

  const detailOf = async (runId: string) => {
    const r = await server.call("GET", `${DF}/monitor/run-detail?runId=${runId}`, { headers: h });
    assert.equal(r.body.status, true, r.text.slice(0, 300));
    return { bytes: r.text.length, nodes: r.body.data.nodes as Record<string, unknown>[] };
  };

  it("a chain passing a large parameter along stores each value once at most, within the run's budget", async () => {
    const parameter = { blob: "x".repeat(2 * MiB), fail: false };
    const r = await server.call("POST", `${DF}/run-sync`, {
      headers: h,
      body: { elementName: "chain", parameter },
    });
    assert.equal(r.body.status, true, r.text.slice(0, 300));
    const { bytes, nodes } = await detailOf(r.body.data.runId ?? r.headers.get("x-run-id"));
    // Before: 40 nodes × (input + output) × 2 MiB, about 160 MiB for this one run.
    assert.ok(bytes < 20 * MiB, `the run's detail is ${(bytes / MiB).toFixed(0)} MiB`);
    const t0 = nodes.find((n) => n.nodeId === "t0") as Record<string, unknown>;
    assert.equal(t0.input, undefined);
    assert.deepEqual(t0.omitted, ["input", "output"]);
    const last = nodes.find((n) => n.nodeId === "last") as Record<string, unknown>;
    assert.equal(last.output, "ok", "a small value is kept");
  });

  it("a run whose succeeded nodes' outputs were not kept is refused a resume, naming the limit", async () => {
    const r = await server.call("POST", `${DF}/run-sync`, {
      headers: h,
      body: { elementName: "chain", parameter: { blob: "x".repeat(2 * MiB), fail: true } },
    });
    const runId = (r.body.data?.runId ?? r.headers.get("x-run-id")) as string;
    assert.ok(runId, r.text.slice(0, 300));
    const resumed = await server.call("POST", `${DF}/run/${runId}/resume`, {
      headers: h,
      body: {},
    });
    assert.equal(resumed.body.status, false, resumed.text);
    assert.match(resumed.body.message, /LIMIT_NODE_LOG_BYTES/);
  });
});

describe("what a run keeps of its script nodes' output", () => {
  let server: TestServer;
  const h = scopeHeaders();
  before(async () => {
    // A run's kept values together within 1 MB here (LIMIT_RESULT_BYTES).
    server = await startServer({ LIMIT_RESULT_BYTES: "1000000" });
  });
  after(() => server.close());

  it("counts each node's stdout against the run's budget, naming what it did not keep", async () => {
    const ids = Array.from({ length: 8 }, (_, i) => `py${i}`);
    const code = "def main(p):\n    print('y' * 200000)\n    return 1\n";
    await deployAndActivate(server, "printers", {
      vertexes: [
        { id: "in", type: "input" },
        ...ids.map((id) => ({ id, type: "script", config: { code } })),
      ],
      edges: ids.map((id) => ({ source: "in", target: id })),
    });
    const r = await server.call("POST", `${DF}/run-sync`, {
      headers: h,
      body: { elementName: "printers", parameter: {} },
    });
    assert.equal(r.body.status, true, r.text.slice(0, 300));
    const d = await server.call(
      "GET",
      `${DF}/monitor/run-detail?runId=${r.headers.get("x-run-id")}`,
      { headers: h },
    );
    const nodes = d.body.data.nodes as { stdout?: string; omitted?: string[] }[];
    const kept = nodes.filter((n) => n.stdout !== undefined).length;
    const omitted = nodes.filter((n) => n.omitted?.includes("stdout")).length;
    // 8 × 200 kB printed against a 1 MB budget: four or so kept, the rest named.
    assert.ok(kept >= 3 && kept <= 5, `${kept} kept`);
    assert.equal(kept + omitted, 8);
    assert.ok(d.text.length < 1_300_000, `the run's detail is ${d.text.length} characters`);
  });
});
