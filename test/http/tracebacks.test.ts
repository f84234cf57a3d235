import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { DF, deployAndActivate } from "../helpers/flows.ts";
import {
  OTHER_SCOPE,
  scopeHeaders,
  startServer,
  TEST_MODE,
  type TestServer,
  upload,
} from "../helpers/server.ts";
import { makeZip } from "../helpers/zip.ts";

const h = scopeHeaders();

const BOOM = [
  "def helper(x):",
  "    return 1 / x",
  "",
  "def main(p):",
  "    return helper(0)",
].join("\n");

const FLOW = {
  vertexes: [
    { id: "in", type: "input" },
    {
      id: "parse",
      type: "script",
      config: { code: ["import json", "def main(p):", "    return json.loads('{bad')"].join("\n") },
    },
    { id: "out", type: "output" },
  ],
  edges: [
    { source: "in", target: "parse" },
    { source: "parse", target: "out" },
  ],
};

/** docs/live-progress.md, "Tracebacks": where a script failed, in the user's own lines. */
describe(`tracebacks in the run detail (${TEST_MODE})`, () => {
  let server: TestServer;
  before(async () => {
    server = await startServer();
    const up = await upload(server, [{ name: "boom.py", content: BOOM }], { path: "/t" });
    assert.equal(up.body.status, true, up.text);
    await deployAndActivate(server, "parser", FLOW);
    const pkg = makeZip([
      { name: "app/main.py", content: "from lib import util\ndef main(p): return util.parse(p)" },
      { name: "app/lib/__init__.py", content: "" },
      {
        name: "app/lib/util.py",
        content: "import json\ndef parse(p):\n    return json.loads('{bad')",
      },
    ]);
    // A module the script writes in its working directory, then imports: a SyntaxError there.
    const writes = [
      "import sys",
      "def main(p):",
      "    open('made.py', 'w').write('def f(:\\n    pass\\n')",
      "    sys.path.insert(0, '.')",
      "    import made",
    ].join("\n");
    const zip = await upload(
      server,
      [
        { name: "pkgboom.zip", content: pkg },
        { name: "writes.py", content: writes },
      ],
      { path: "/t" },
    );
    assert.equal(zip.body.status, true, zip.text);
  });
  after(async () => {
    await server?.close();
  });

  it("a failed task's detail carries its frames: file, line, function, code; no harness frame", async () => {
    const r = await server.call("POST", "/script/script/run-sync", {
      headers: h,
      body: { elementName: "boom", path: "/t", parameter: {} },
    });
    const taskId = r.headers.get("x-task-id") ?? "";
    assert.ok(taskId, r.text);
    const d = await server.call("GET", `${DF}/monitor/run?runId=${taskId}`, { headers: h });
    assert.equal(d.body.status, true, d.text);
    const tb = d.body.data.traceback;
    assert.equal(tb.type, "ZeroDivisionError");
    assert.equal(tb.message, "division by zero");
    assert.deepEqual(tb.frames, [
      { file: "boom.py", line: 5, function: "main", code: "return helper(0)" },
      { file: "boom.py", line: 2, function: "helper", code: "return 1 / x" },
    ]);
    assert.match(tb.text, /File "boom.py", line 2, in helper/);
    assert.doesNotMatch(tb.text, /harness/);
    const detail = await server.call("GET", `${DF}/monitor/run-detail?runId=${taskId}`, {
      headers: h,
    });
    assert.deepEqual(detail.body.data.traceback.frames, tb.frames);
    // Another scope sees no run at all.
    const other = await server.call("GET", `${DF}/monitor/run?runId=${taskId}`, {
      headers: scopeHeaders(OTHER_SCOPE),
    });
    assert.equal(other.body.code, 28020002, other.text);
  });

  it("a flow's failed script node: the run and the node carry its own frames only", async () => {
    const r = await server.call("POST", `${DF}/run-sync`, {
      headers: h,
      body: { elementName: "parser", parameter: {} },
    });
    const runId = r.headers.get("x-run-id") ?? "";
    assert.ok(runId, r.text);
    const d = await server.call("GET", `${DF}/monitor/run?runId=${runId}`, { headers: h });
    const tb = d.body.data.traceback;
    assert.equal(tb.nodeId, "parse");
    assert.equal(tb.type, "JSONDecodeError");
    // json's own frames are not the user's: only the script's line shows.
    assert.deepEqual(tb.frames, [
      { file: "node_parse.py", line: 3, function: "main", code: "return json.loads('{bad')" },
    ]);
    const detail = await server.call("GET", `${DF}/monitor/run-detail?runId=${runId}`, {
      headers: h,
    });
    const node = detail.body.data.nodes.find((n: { nodeId: string }) => n.nodeId === "parse");
    assert.deepEqual(node.traceback.frames, tb.frames);
    assert.equal(
      detail.body.data.nodes.find((n: { nodeId: string }) => n.nodeId === "in").traceback,
      undefined,
    );
  });

  it("a traceback's text names no directory of the host: package, standard library", async () => {
    const r = await server.call("POST", "/script/script/run-sync", {
      headers: h,
      body: { elementName: "pkgboom", path: "/t", parameter: {} },
    });
    const taskId = r.headers.get("x-task-id") ?? "";
    assert.ok(taskId, r.text);
    const d = await server.call("GET", `${DF}/monitor/run?runId=${taskId}`, { headers: h });
    const tb = d.body.data.traceback;
    assert.equal(tb.type, "JSONDecodeError", d.text);
    assert.deepEqual(
      tb.frames.map((f: { file: string }) => f.file),
      ["app/main.py", "app/lib/util.py"],
    );
    assert.match(tb.text, /File "app\/lib\/util.py", line 3, in parse/);
    assert.match(tb.text, /File "[^"]*json\/decoder.py"/, "library frames stay, named within it");
    for (const m of tb.text.matchAll(/File "([^"]+)"/g))
      assert.ok(!m[1].startsWith("/"), `an absolute path in the text: ${m[1]}`);
    assert.ok(!tb.text.includes(server.dataDir), "the data directory is not named");
    // A SyntaxError names its file in the message and in the text too.
    const s = await server.call("POST", "/script/script/run-sync", {
      headers: h,
      body: { elementName: "writes", path: "/t", parameter: {} },
    });
    const sd = await server.call("GET", `${DF}/monitor/run?runId=${s.headers.get("x-task-id")}`, {
      headers: h,
    });
    const st = sd.body.data.traceback;
    assert.equal(st.type, "SyntaxError", sd.text);
    assert.match(st.message, /\(made.py, line 1\)/);
    assert.match(st.text, /File "made.py", line 1/);
    for (const text of [st.message, st.text])
      assert.doesNotMatch(text, /"\/|\(\//, "no absolute path");
  });

  it("a succeeded run has no traceback", async () => {
    const ok = await upload(
      server,
      [{ name: "fine.py", content: "def main(p):\n    return 1\n" }],
      {
        path: "/t",
      },
    );
    assert.equal(ok.body.status, true, ok.text);
    const r = await server.call("POST", "/script/script/run-sync", {
      headers: h,
      body: { elementName: "fine", path: "/t", parameter: {} },
    });
    const taskId = r.headers.get("x-task-id") ?? "";
    const d = await server.call("GET", `${DF}/monitor/run?runId=${taskId}`, { headers: h });
    assert.equal(d.body.data.traceback, undefined, d.text);
  });
});
