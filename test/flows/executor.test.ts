import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { executeFlow, type FlowDeps } from "../../src/flows/executor.ts";
import { inlineExpressions } from "../../src/flows/expr-jobs.ts";
import { type Graph, normalizeConfigure } from "../../src/flows/graph.ts";
import { createFakeClock } from "../scheduler/fake-clock.ts";

type ScriptReq = Parameters<FlowDeps["runScript"]>[0];

function deferred<T>() {
  let resolve!: (v: T) => void;
  const promise = new Promise<T>((r) => {
    resolve = r;
  });
  return { promise, resolve };
}

function fakeDeps(
  script: (req: ScriptReq) => Promise<unknown> | unknown = (r) => r.parameter,
): FlowDeps & { calls: ScriptReq[] } {
  const calls: ScriptReq[] = [];
  return {
    calls,
    async runScript(req) {
      calls.push(req);
      try {
        return { ok: true, value: await script(req), stdout: `out:${req.nodeId}`, stderr: "" };
      } catch (err) {
        return { ok: false, error: (err as Error).message, stdout: "", stderr: "boom" };
      }
    },
    async runSubflow(req) {
      return { ok: true, value: { child: req.parameter } };
    },
    fetch,
    expressions: inlineExpressions(),
    valueBytes: 64 * 1024,
    logValueBytes: 64 * 1024,
    now: Date.now,
  };
}

const run = (
  graph: Graph,
  parameter: unknown,
  deps: FlowDeps = fakeDeps(),
  configure: unknown = {},
  signal = new AbortController().signal,
) =>
  executeFlow({
    runId: "r1",
    graph,
    configure: normalizeConfigure(configure),
    parameter,
    signal,
    deps,
  });

const tf = (id: string, expr: string) => ({
  id,
  type: "transform",
  config: { operators: [{ type: "expr", expr }] },
});
const statuses = (r: { nodes: { nodeId: string; status: string }[] }) =>
  Object.fromEntries(r.nodes.map((n) => [n.nodeId, n.status]));

describe("executeFlow", () => {
  it("runs a linear flow; the output node's input is the result", async () => {
    const graph: Graph = {
      vertexes: [
        { id: "in", type: "input" },
        {
          id: "clean",
          type: "transform",
          config: {
            operators: [
              { type: "filter", expr: "amount > 0" },
              { type: "map", fields: { total: "amount * qty" } },
            ],
          },
        },
        { id: "score", type: "script", config: { element: { elementName: "score" } } },
        { id: "out", type: "output" },
      ],
      edges: [
        { source: "in", target: "clean" },
        { source: "clean", target: "score", when: "$count($) > 0" },
        { source: "score", target: "out" },
      ],
    };
    const deps = fakeDeps((r) => (r.parameter as { total: number }[]).map((x) => x.total));
    const res = await run(
      graph,
      [
        { amount: 2, qty: 3 },
        { amount: 0, qty: 9 },
      ],
      deps,
    );
    assert.equal(res.status, "SUCCESS");
    assert.deepEqual(res.result, [6]);
    assert.deepEqual(deps.calls[0]?.element, { elementName: "score" });
    assert.deepEqual(statuses(res), {
      in: "SUCCESS",
      clean: "SUCCESS",
      score: "SUCCESS",
      out: "SUCCESS",
    });
  });

  it("an edge whose `when` is false is not taken; skips propagate", async () => {
    const graph: Graph = {
      vertexes: [
        { id: "in", type: "input" },
        tf("a", "$ * 2"),
        tf("b", "$ + 1"),
        tf("c", "$ + 100"),
      ],
      edges: [
        { source: "in", target: "a", when: "$ > 10" },
        { source: "a", target: "b" },
        { source: "in", target: "c" },
      ],
    };
    const res = await run(graph, 3);
    assert.deepEqual(statuses(res), { in: "SUCCESS", a: "SKIPPED", b: "SKIPPED", c: "SUCCESS" });
    // Sinks b (skipped) and c: the result keys only the sinks that ran.
    assert.deepEqual(res.result, { c: 103 });
    const taken = await run(graph, 20);
    assert.deepEqual(taken.result, { b: 41, c: 120 });
  });

  it("a node with one taken and one untaken input still runs", async () => {
    const graph: Graph = {
      vertexes: [
        { id: "in", type: "input" },
        tf("a", "1"),
        tf("b", "2"),
        { id: "m", type: "merge" },
      ],
      edges: [
        { source: "in", target: "a" },
        { source: "in", target: "b", when: "false" },
        { source: "a", target: "m" },
        { source: "b", target: "m" },
      ],
    };
    const res = await run(graph, {});
    assert.deepEqual(res.result, { a: 1 });
  });

  it("independent nodes run concurrently (diamond)", async () => {
    const gates = { left: deferred<void>(), right: deferred<void>() };
    const started: string[] = [];
    const bothStarted = deferred<void>();
    const deps = fakeDeps(async (req) => {
      started.push(req.nodeId);
      if (started.length === 2) bothStarted.resolve();
      await gates[req.nodeId as "left" | "right"].promise;
      return `${req.nodeId}!`;
    });
    const graph: Graph = {
      vertexes: [
        { id: "in", type: "input" },
        { id: "left", type: "script", config: { code: "return 1" } },
        { id: "right", type: "script", config: { code: "return 2" } },
        { id: "join", type: "merge" },
      ],
      edges: [
        { source: "in", target: "left" },
        { source: "in", target: "right" },
        { source: "left", target: "join" },
        { source: "right", target: "join" },
      ],
    };
    const pending = run(graph, {}, deps);
    await bothStarted.promise; // would hang (test timeout) if the nodes ran one after the other
    assert.deepEqual(started.sort(), ["left", "right"]);
    gates.right.resolve();
    gates.left.resolve();
    const res = await pending;
    assert.deepEqual(res.result, { left: "left!", right: "right!" });
  });

  it("merge concat joins arrays in edge order; join inner and left", async () => {
    const base = (config: object): Graph => ({
      vertexes: [
        { id: "in", type: "input" },
        tf("users", "[{'id':1,'name':'ann'},{'id':2,'name':'bob'}]"),
        tf("orders", "[{'id':2,'amount':5},{'id':2,'amount':7},{'id':3,'amount':1}]"),
        { id: "m", type: "merge", config },
      ],
      edges: [
        { source: "in", target: "orders" },
        { source: "in", target: "users" },
        { source: "users", target: "m" },
        { source: "orders", target: "m" },
      ],
    });
    // JSONata builds null-prototype objects; compare as JSON, which is what a run stores.
    const json = (v: unknown) => JSON.parse(JSON.stringify(v));
    const concat = await run(base({ mode: "concat" }), {});
    assert.deepEqual((concat.result as unknown[]).length, 5);
    assert.deepEqual(json(concat.result), [
      { id: 1, name: "ann" },
      { id: 2, name: "bob" },
      { id: 2, amount: 5 },
      { id: 2, amount: 7 },
      { id: 3, amount: 1 },
    ]);
    const inner = await run(base({ mode: "join", left: "users", right: "orders", on: "id" }), {});
    assert.deepEqual(json(inner.result), [
      { id: 2, name: "bob", amount: 5 },
      { id: 2, name: "bob", amount: 7 },
    ]);
    const left = await run(
      base({ mode: "join", left: "users", right: "orders", on: "id", kind: "left" }),
      {},
    );
    assert.deepEqual(json(left.result), [
      { id: 1, name: "ann" },
      { id: 2, name: "bob", amount: 5 },
      { id: 2, name: "bob", amount: 7 },
    ]);
  });

  it("retries then succeeds", async () => {
    let calls = 0;
    const deps = fakeDeps(() => {
      calls++;
      if (calls < 3) throw new Error(`flaky ${calls}`);
      return "done";
    });
    const graph: Graph = {
      vertexes: [{ id: "s", type: "script", config: { code: "x" }, retries: 2, retryDelayMs: 5 }],
      edges: [],
    };
    const res = await run(graph, {}, deps);
    assert.equal(res.status, "SUCCESS");
    assert.equal(res.result, "done");
    assert.equal(res.nodes[0]?.attempts, 3);
    const fail = await run(
      { vertexes: [{ id: "s", type: "script", config: { code: "x" }, retries: 1 }], edges: [] },
      {},
      fakeDeps(() => {
        throw new Error("always");
      }),
    );
    assert.equal(fail.status, "FAILURE");
    assert.equal(fail.failedNodeId, "s");
    assert.equal(fail.error, "always");
    assert.equal(fail.nodes[0]?.attempts, 2);
  });

  it("timeoutSeconds aborts the node", async () => {
    let aborted = false;
    const deps = fakeDeps(
      (req) =>
        new Promise((_, reject) => {
          req.signal.addEventListener("abort", () => {
            aborted = true;
            reject(new Error("killed"));
          });
        }),
    );
    const graph: Graph = {
      vertexes: [{ id: "slow", type: "script", config: { code: "x" }, timeoutSeconds: 0.05 }],
      edges: [],
    };
    const t0 = Date.now();
    const res = await run(graph, {}, deps);
    assert.ok(Date.now() - t0 < 1000);
    assert.equal(res.status, "FAILURE");
    assert.match(res.error ?? "", /timed out after 0.05s/);
    assert.ok(aborted, "the script's signal was aborted");
    assert.equal(deps.calls[0]?.timeoutMs, 50);
  });

  it("node timeouts and retry delays run on the injected clock", async () => {
    const clock = createFakeClock();
    const attemptsStarted: number[] = [];
    // Every attempt hangs until its signal aborts: only the (fake) node timeout ends it.
    const deps = fakeDeps(
      (req) =>
        new Promise((_, reject) => {
          attemptsStarted.push(clock.now());
          req.signal.addEventListener("abort", () => reject(new Error("killed")));
        }),
    );
    const graph: Graph = {
      vertexes: [
        {
          id: "s",
          type: "script",
          config: { code: "x" },
          timeoutSeconds: 60,
          retries: 1,
          retryDelayMs: 30_000,
        },
      ],
      edges: [],
    };
    const start = clock.now();
    const done = executeFlow({
      runId: "r1",
      graph,
      configure: normalizeConfigure({}),
      parameter: {},
      signal: new AbortController().signal,
      deps,
      clock,
    });
    await clock.advanceAsync(59_999);
    assert.equal(attemptsStarted.length, 1, "the first attempt still runs before its 60 s");
    await clock.advanceAsync(1 + 29_999);
    assert.equal(attemptsStarted.length, 1, "the retry waits its 30 s delay");
    await clock.advanceAsync(1);
    // The retry starts through a few promise hops after its timer fired: yield until it has.
    for (let i = 0; i < 50 && attemptsStarted.length < 2; i++)
      await new Promise((r) => setImmediate(r));
    assert.deepEqual(attemptsStarted, [start, start + 90_000]);
    await clock.advanceAsync(60_000);
    const res = await done;
    assert.equal(res.status, "FAILURE");
    assert.match(res.error ?? "", /node timed out after 60s/);
    assert.equal(res.nodes[0]?.attempts, 2);
  });

  it("continueOnError: the run succeeds and the failed node's dependents are skipped", async () => {
    const deps = fakeDeps(() => {
      throw new Error("bad row");
    });
    const graph: Graph = {
      vertexes: [
        { id: "in", type: "input" },
        { id: "s", type: "script", config: { code: "x" }, continueOnError: true },
        tf("after", "'never'"),
        tf("other", "'fine'"),
      ],
      edges: [
        { source: "in", target: "s" },
        { source: "s", target: "after" },
        { source: "in", target: "other" },
      ],
    };
    const res = await run(graph, {}, deps);
    assert.equal(res.status, "SUCCESS");
    assert.deepEqual(statuses(res), {
      in: "SUCCESS",
      s: "FAILURE",
      after: "SKIPPED",
      other: "SUCCESS",
    });
    assert.equal(res.nodes[1]?.error, "bad row");
    assert.deepEqual(res.result, { other: "fine" });
  });

  it("a failure without continueOnError fails the run and cancels the rest", async () => {
    const deps = fakeDeps((req) => {
      if (req.nodeId === "bad") throw new Error("nope");
      return new Promise(() => {}); // never finishes on its own
    });
    const graph: Graph = {
      vertexes: [
        { id: "bad", type: "script", config: { code: "x" } },
        { id: "slow", type: "script", config: { code: "y" } },
        tf("after", "1"),
      ],
      edges: [{ source: "bad", target: "after" }],
    };
    const res = await run(graph, {}, deps);
    assert.equal(res.status, "FAILURE");
    assert.equal(res.failedNodeId, "bad");
    assert.deepEqual(statuses(res), { bad: "FAILURE", slow: "CANCELED", after: "CANCELED" });
  });

  it("abort of the signal cancels the run", async () => {
    const ctl = new AbortController();
    const started = deferred<void>();
    const deps = fakeDeps(() => {
      started.resolve();
      return new Promise(() => {});
    });
    const graph: Graph = {
      vertexes: [{ id: "s", type: "script", config: { code: "x" } }, tf("t", "1")],
      edges: [{ source: "s", target: "t" }],
    };
    const pending = run(graph, {}, deps, {}, ctl.signal);
    await started.promise;
    ctl.abort();
    const res = await pending;
    assert.equal(res.status, "CANCELED");
    assert.deepEqual(statuses(res), { s: "CANCELED", t: "CANCELED" });
    assert.ok(deps.calls[0]?.signal.aborted, "the script saw the abort");
  });

  it("a customized runTimeout ends the run as FAILURE", async () => {
    const deps = fakeDeps(() => new Promise(() => {}));
    const graph: Graph = {
      vertexes: [{ id: "s", type: "script", config: { code: "x" } }],
      edges: [],
    };
    const res = await run(graph, {}, deps, { runTimeout: { type: "customized", seconds: 0.05 } });
    assert.equal(res.status, "FAILURE");
    assert.match(res.error ?? "", /run timed out/);
  });

  it("output selection: single sink's output without an output node", async () => {
    const graph: Graph = {
      vertexes: [{ id: "in", type: "input" }, tf("a", "$.x * 2")],
      edges: [{ source: "in", target: "a" }],
    };
    assert.equal((await run(graph, { x: 4 })).result, 8);
    const skippedOut: Graph = {
      vertexes: [{ id: "in", type: "input" }, tf("a", "1"), { id: "out", type: "output" }],
      edges: [
        { source: "in", target: "a" },
        { source: "a", target: "out", when: "false" },
      ],
    };
    assert.equal((await run(skippedOut, {})).result, null);
  });

  it("inline code gets the prelude; the node input is the script parameter", async () => {
    const deps = fakeDeps(() => 1);
    const graph: Graph = {
      vertexes: [
        { id: "in", type: "input" },
        { id: "s", type: "script", config: { code: "main()" } },
      ],
      edges: [{ source: "in", target: "s" }],
    };
    await run(graph, { a: 1 }, deps, { prelude: "import json" });
    assert.equal(deps.calls[0]?.code, "import json\nmain()");
    assert.deepEqual(deps.calls[0]?.parameter, { a: 1 });
  });

  it("DETAILED logs keep input, output and stdout; CONCISE only status, times and error", async () => {
    const graph: Graph = {
      vertexes: [
        { id: "in", type: "input" },
        { id: "s", type: "script", config: { code: "x" } },
      ],
      edges: [{ source: "in", target: "s" }],
    };
    const detailed = await run(
      graph,
      { a: 1 },
      fakeDeps(() => 42),
    );
    assert.deepEqual(detailed.nodes[1], {
      ...detailed.nodes[1],
      input: { a: 1 },
      output: 42,
      stdout: "out:s",
      stderr: "",
      attempts: 1,
      status: "SUCCESS",
    });
    const concise = await run(
      graph,
      { a: 1 },
      fakeDeps(() => 42),
      { logContent: "CONCISE" },
    );
    const node = concise.nodes[1] ?? assert.fail();
    assert.deepEqual(Object.keys(node).sort(), [
      "attempts",
      "endTime",
      "nodeId",
      "nodeType",
      "startTime",
      "status",
    ]);
  });

  it("subflow node passes its input and returns the child result", async () => {
    const graph: Graph = {
      vertexes: [
        { id: "in", type: "input" },
        { id: "sub", type: "subflow", config: { element: { elementName: "child" } } },
      ],
      edges: [{ source: "in", target: "sub" }],
    };
    assert.deepEqual((await run(graph, 5)).result, { child: 5 });
  });
});
