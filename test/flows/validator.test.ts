/* biome-ignore-all lint/suspicious/noTemplateCurlyInString: run-name placeholders are literal text */
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { ValidationCode as C, type ValidationResult } from "../../src/flows/validation-codes.ts";
import { validateFlow } from "../../src/flows/validator.ts";

const existing = new Set(["PY:score", "DPL:child", "PY:notify"]);
const ctx = {
  elementExists: (l: { elementName: string }, t: "PY" | "DPL") =>
    existing.has(`${t}:${l.elementName}`),
  // Fake parser: the first line containing "def (" is a syntax error.
  async checkPythonSyntax(code: string) {
    const i = code.split("\n").findIndex((l) => l.includes("def ("));
    return i < 0 ? null : { line: i + 1, message: "invalid syntax" };
  },
};

const ok = () => ({
  vertexes: [
    { id: "in", type: "input", config: { schema: { type: "object", required: ["orders"] } } },
    {
      id: "clean",
      type: "transform",
      config: {
        operators: [
          { id: "f1", type: "filter", expr: "amount > 0" },
          { id: "m1", type: "map", fields: { total: "amount * qty" } },
        ],
      },
    },
    { id: "score", type: "script", config: { element: { elementName: "score", path: "/ml" } } },
    { id: "out", type: "output" },
  ],
  edges: [
    { source: "in", target: "clean" },
    { source: "clean", target: "score", when: "$count($) > 0" },
    { source: "score", target: "out" },
  ],
});

async function check(flow: unknown, configure: unknown = {}): Promise<ValidationResult[]> {
  return validateFlow({ flow, configure }, ctx);
}

function only(results: ValidationResult[], code: number): ValidationResult {
  const hits = results.filter((r) => r.errorCode === code);
  assert.equal(hits.length, 1, JSON.stringify(results));
  return hits[0] as ValidationResult;
}

describe("validateFlow", () => {
  it("accepts the contract's example flow", async () => {
    assert.deepEqual(await check(ok(), { triggers: [{ type: "manual" }] }), []);
  });

  it("rejects a flow that is not a graph", async () => {
    const r = only(await check({ vertexes: 3 }), C.INVALID_GRAPH);
    assert.deepEqual(r.path, ["flow", "vertexes"]);
  });

  it("unknown node type", async () => {
    const f = ok();
    f.vertexes[2] = { id: "score", type: "sql", config: {} } as never;
    const r = only(await check(f), C.UNKNOWN_NODE_TYPE);
    assert.equal(r.nodeId, "score");
    assert.deepEqual(r.path, ["flow", "vertexes", 2, "type"]);
    // The message says what to write instead.
    assert.equal(
      r.errorMessage,
      'unknown node type "sql": must be one of input, transform, script, http, subflow, merge, output',
    );
  });

  it("a field a node does not read is a warning at its path, not silence", async () => {
    const f = ok();
    f.vertexes[1] = {
      id: "clean",
      type: "transform",
      config: {
        operators: [{ id: "s1", type: "sort", by: [{ field: "amount", order: "desc" }] }],
      },
    } as never;
    f.vertexes[2] = {
      id: "score",
      type: "script",
      config: { element: { elementName: "score", version: 3 } },
    } as never;
    f.vertexes.push({
      id: "h",
      type: "http",
      config: {
        url: "http://x",
        timeout: 5,
        body: { free: { form: 1 } },
        headers: { "x-a": "1" },
      },
    } as never);
    f.edges.push({ source: "in", target: "h" });
    f.vertexes[0] = {
      id: "in",
      type: "input",
      config: { schema: { type: "object", properties: { a: { type: "number" } } } },
    } as never;
    const found = await check(f);
    const warned = found.map((r) => [r.errorCode, r.severity, r.nodeId, r.path.slice(3).join(".")]);
    assert.deepEqual(
      warned,
      [
        [C.INVALID_NODE_CONFIG, 1, "clean", "config.operators.0.by.0.order"],
        [C.INVALID_NODE_CONFIG, 1, "score", "config.element.version"],
        [C.INVALID_NODE_CONFIG, 1, "h", "config.timeout"],
      ],
      JSON.stringify(found),
    );
    const [order, version, timeout] = found;
    assert.equal(order?.operatorId, "s1");
    assert.match(order?.errorMessage ?? "", /^is not a field of a sort operator and is ignored/);
    assert.match(version?.errorMessage ?? "", /runs the version pinned when .* activate/);
    assert.match(timeout?.errorMessage ?? "", /^is not a field of an http node and is ignored/);
  });

  it("a misspelt operator type or http method lists the values it may be", async () => {
    const f = ok();
    f.vertexes[1] = {
      id: "clean",
      type: "transform",
      config: { operators: [{ id: "m", type: "mapp", fields: {} }] },
    } as never;
    f.vertexes.push({
      id: "h",
      type: "http",
      config: { url: "http://x", method: "GETT" },
    } as never);
    const found = await check(f);
    const op = found.find((r) => r.operatorId === "m");
    assert.match(
      op?.errorMessage ?? "",
      /^unknown operator type "mapp": must be one of filter, map, select, rename, sort, limit, distinct, aggregate, flatten, expr$/,
    );
    const method = found.find((r) => r.nodeId === "h" && r.path.at(-1) === "method");
    assert.equal(
      method?.errorMessage,
      "must be one of GET, POST, PUT, PATCH, DELETE, HEAD, OPTIONS",
      JSON.stringify(found),
    );
  });

  it("duplicate id", async () => {
    const f = ok();
    f.vertexes.push({ id: "clean", type: "output" });
    const r = only(await check(f), C.DUPLICATE_NODE_ID);
    assert.equal(r.nodeId, "clean");
    assert.deepEqual(r.path, ["flow", "vertexes", 4, "id"]);
  });

  it("edge to an unknown vertex", async () => {
    const f = ok();
    f.edges.push({ source: "score", target: "nowhere" });
    const r = only(await check(f), C.EDGE_UNKNOWN_VERTEX);
    assert.equal(r.nodeId, "score->nowhere");
    assert.deepEqual(r.path, ["flow", "edges", 3, "target"]);
  });

  it("cycle", async () => {
    const f = ok();
    f.edges.push({ source: "score", target: "clean" });
    const r = only(await check(f), C.CYCLE);
    assert.equal(r.nodeId, "clean");
    assert.deepEqual(r.path, ["flow", "edges", 3]);
  });

  it("invalid node config, with operator id and type", async () => {
    const f = ok();
    f.vertexes[1] = {
      id: "clean",
      type: "transform",
      config: { operators: [{ id: "l1", type: "limit", count: -1 }] },
    } as never;
    const r = only(await check(f), C.INVALID_NODE_CONFIG);
    assert.equal(r.nodeId, "clean");
    assert.equal(r.operatorId, "l1");
    assert.equal(r.operatorType, "limit");
    assert.deepEqual(r.path, ["flow", "vertexes", 1, "config", "operators", 0, "count"]);
  });

  it("invalid node config: missing required field and unknown operator", async () => {
    const f = ok();
    f.vertexes.push({ id: "h", type: "http", config: {} } as never);
    f.edges.push({ source: "out", target: "h" });
    const r = only(await check(f), C.INVALID_NODE_CONFIG);
    assert.deepEqual(r.path, ["flow", "vertexes", 4, "config", "url"]);
    const g = ok();
    g.vertexes[1] = {
      id: "clean",
      type: "transform",
      config: { operators: [{ type: "pivot" }] },
    } as never;
    assert.deepEqual(only(await check(g), C.INVALID_NODE_CONFIG).path, [
      "flow",
      "vertexes",
      1,
      "config",
      "operators",
      0,
      "type",
    ]);
  });

  it("invalid JSONata in an operator", async () => {
    const f = ok();
    (
      f.vertexes[1] as { config: { operators: { expr?: string; fields?: object }[] } }
    ).config.operators[1] = { id: "m1", type: "map", fields: { total: "amount *" } } as never;
    const r = only(await check(f), C.INVALID_EXPRESSION);
    assert.equal(r.nodeId, "clean");
    assert.equal(r.operatorId, "m1");
    assert.deepEqual(r.path, ["flow", "vertexes", 1, "config", "operators", 1, "fields", "total"]);
  });

  it("invalid JSONata in an edge condition", async () => {
    const f = ok();
    (f.edges[1] as { when: string }).when = "$count($ > ";
    const r = only(await check(f), C.INVALID_EXPRESSION);
    assert.equal(r.nodeType, "edge");
    assert.deepEqual(r.path, ["flow", "edges", 1, "when"]);
  });

  it("invalid template in an http node", async () => {
    const f = ok();
    f.vertexes.push({
      id: "h",
      type: "http",
      config: { url: "http://x/{{id}}", body: { a: ["ok", "{{ $$ + }}"] } },
    } as never);
    f.edges.push({ source: "out", target: "h" });
    const r = only(await check(f), C.INVALID_EXPRESSION);
    assert.equal(r.nodeId, "h");
    assert.deepEqual(r.path, ["flow", "vertexes", 4, "config", "body", "a", 1]);
  });

  it("referenced elements missing: script, subflow, custom error handler", async () => {
    const f = ok();
    (f.vertexes[2] as { config: object }).config = { element: { elementName: "gone" } };
    f.vertexes.push({
      id: "sub",
      type: "subflow",
      config: { element: { elementName: "nochild" } },
    } as never);
    f.edges.push({ source: "out", target: "sub" });
    const results = await check(f, {
      errorHandlers: { custom: { element: { elementName: "nohandler" } } },
    });
    const hits = results.filter((r) => r.errorCode === C.ELEMENT_NOT_FOUND);
    assert.deepEqual(
      hits.map((h) => [h.nodeId, h.path]),
      [
        ["score", ["flow", "vertexes", 2, "config", "element"]],
        ["sub", ["flow", "vertexes", 4, "config", "element"]],
        ["configure", ["configure", "errorHandlers", "custom", "element"]],
      ],
    );
  });

  it("Python syntax error reports the line in the user's code, not counting the prelude", async () => {
    const f = ok();
    (f.vertexes[2] as { config: object }).config = { code: "x = 1\ndef (:\n" };
    const r = only(
      await check(f, { prelude: "import math\nimport json\n" }),
      C.PYTHON_SYNTAX_ERROR,
    );
    assert.equal(r.nodeId, "score");
    assert.deepEqual(r.path, ["flow", "vertexes", 2, "config", "code"]);
    assert.match(r.errorMessage, /line 2:/);
  });

  it("Python syntax error in the prelude is reported on configure", async () => {
    const r = only(await check(ok(), { prelude: "def (" }), C.PYTHON_SYNTAX_ERROR);
    assert.equal(r.nodeId, "configure");
    assert.deepEqual(r.path, ["configure", "prelude"]);
  });

  it("more than one output", async () => {
    const f = ok();
    f.vertexes.push({ id: "out2", type: "output" });
    f.edges.push({ source: "score", target: "out2" });
    const r = only(await check(f), C.MULTIPLE_OUTPUTS);
    assert.equal(r.nodeId, "out2");
    assert.deepEqual(r.path, ["flow", "vertexes", 4, "type"]);
  });

  it("invalid cron: bad field, wrong field count; 6 fields accepted", async () => {
    const cron = (crontab: string) => ({
      type: "cron",
      name: "n",
      crontab,
      parameter: { orders: [] },
    });
    const r = only(
      await check(ok(), { triggers: [{ type: "manual" }, cron("61 * * * *")] }),
      C.INVALID_CRON,
    );
    assert.equal(r.nodeId, "configure");
    assert.deepEqual(r.path, ["configure", "triggers", 1, "crontab"]);
    only(await check(ok(), { triggers: [cron("* * * *")] }), C.INVALID_CRON);
    only(await check(ok(), { triggers: [cron("0 0 0 1 1 * 2030")] }), C.INVALID_CRON);
    assert.deepEqual(await check(ok(), { triggers: [cron("*/2 * * * * *")] }), []);
  });

  it("invalid time zone", async () => {
    const t = {
      type: "cron",
      name: "n",
      crontab: "0 0 * * *",
      timezone: "Mars/Olympus",
      parameter: { orders: [] },
    };
    const r = only(await check(ok(), { triggers: [t] }), C.INVALID_TIMEZONE);
    assert.deepEqual(r.path, ["configure", "triggers", 0, "timezone"]);
    t.timezone = "Asia/Shanghai";
    assert.deepEqual(await check(ok(), { triggers: [t] }), []);
  });

  it("cron parameter not matching the input schema", async () => {
    const t = { type: "cron", name: "n", crontab: "0 0 * * *", parameter: { items: [] } };
    const r = only(await check(ok(), { triggers: [t] }), C.TRIGGER_PARAMETER_MISMATCH);
    assert.deepEqual(r.path, ["configure", "triggers", 0, "parameter"]);
    assert.match(r.errorMessage, /orders/);
  });

  it("duplicate cron trigger names", async () => {
    const t = { type: "cron", name: "n", crontab: "0 0 * * *", parameter: { orders: [] } };
    const r = only(await check(ok(), { triggers: [t, { ...t }] }), C.DUPLICATE_TRIGGER_NAME);
    assert.deepEqual(r.path, ["configure", "triggers", 1, "name"]);
  });

  it("unknown runNameTemplate placeholder", async () => {
    const r = only(
      await check(ok(), { runNameTemplate: "${elementName}-${nope}-${param.a}" }),
      C.UNKNOWN_PLACEHOLDER,
    );
    assert.deepEqual(r.path, ["configure", "runNameTemplate"]);
    assert.match(r.errorMessage, /\$\{nope\}/);
  });

  it("malformed configure fields", async () => {
    const results = await check(ok(), {
      triggers: [{ type: "hourly" }],
      runTimeout: { type: "customized" },
      logContent: "VERBOSE",
      fileCleanup: { type: "days", days: 0 },
      errorHandlers: { bot: { webhookUrl: "ftp://x" } },
    });
    assert.ok(
      results.every(
        (r) =>
          r.errorCode === C.INVALID_CONFIGURE &&
          r.nodeId === "configure" &&
          r.nodeType === "configure",
      ),
    );
    assert.deepEqual(
      results.map((r) => r.path),
      [
        ["configure", "triggers", 0, "type"],
        ["configure", "errorHandlers", "bot", "webhookUrl"],
        ["configure", "runTimeout", "seconds"],
        ["configure", "logContent"],
        ["configure", "fileCleanup", "days"],
      ],
    );
  });

  it("merge join must name its sources", async () => {
    const f = ok();
    f.vertexes.push({
      id: "j",
      type: "merge",
      config: { mode: "join", left: "score", right: "in", on: "id" },
    } as never);
    f.edges.push({ source: "score", target: "j" });
    const r = only(await check(f), C.INVALID_NODE_CONFIG);
    assert.deepEqual(r.path, ["flow", "vertexes", 4, "config", "right"]);
  });

  it("unreachable vertex is a warning", async () => {
    const f = ok();
    f.vertexes.push({ id: "lost", type: "transform", config: { operators: [] } } as never);
    const r = only(await check(f), C.UNREACHABLE_VERTEX);
    assert.equal(r.severity, 1);
    assert.equal(r.nodeId, "lost");
    assert.deepEqual(r.path, ["flow", "vertexes", 4]);
  });
});

describe("names of at most 200 characters counted as the schema counts them (code points)", () => {
  // 150 characters outside the BMP: 300 UTF-16 units, within the bound (docs/flow-graph.md,
  // "Names and IDs"), so the deploy stores it and each finding must name the node by it.
  const wide = "😀".repeat(150);
  it("a finding about a node with such an ID names it, with its type", async () => {
    const flow = {
      vertexes: [
        { id: "in", type: "input" },
        { id: wide, type: "transform", config: { operators: [{ id: wide, type: "nope" }] } },
        { id: "out", type: "output" },
      ],
      edges: [
        { id: wide, source: "in", target: wide },
        { source: wide, target: "out" },
      ],
    };
    const found = await validateFlow({ flow, configure: {} }, ctx);
    const schema = found.filter((f) => f.errorCode === C.INVALID_GRAPH);
    assert.deepEqual(schema, [], JSON.stringify(schema));
    const op = found.find((f) => JSON.stringify(f.path).includes('"operators",0,"type"'));
    assert.ok(op, JSON.stringify(found));
    assert.equal(op.nodeId, wide);
    assert.equal(op.nodeType, "transform");
    assert.equal(op.operatorId, wide);
    assert.match(op.errorMessage ?? "", /unknown operator type "nope"/);
  });
});

describe("timeouts no timer can wait for", () => {
  it("a node's or an http node's timeoutSeconds past 24.8 days is a finding at its path", async () => {
    const flow = ok();
    (flow.vertexes[2] as Record<string, unknown>).timeoutSeconds = 1e10;
    flow.vertexes.splice(3, 0, {
      id: "call",
      type: "http",
      config: { url: "http://example.com/", timeoutSeconds: 1e10 } as never,
    });
    flow.edges.push({ source: "in", target: "call" });
    const found = (await check(flow)).filter((r) => r.path?.at(-1) === "timeoutSeconds");
    assert.deepEqual(
      found.map((r) => r.nodeId),
      ["score", "call"],
      JSON.stringify(found),
    );
  });

  it("up to 24.8 days is accepted", async () => {
    const flow = ok();
    (flow.vertexes[2] as Record<string, unknown>).timeoutSeconds = 2_147_483;
    assert.deepEqual(await check(flow), []);
  });
});
