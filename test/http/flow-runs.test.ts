import assert from "node:assert/strict";
import http from "node:http";
import type { AddressInfo } from "node:net";
import { after, before, describe, it } from "node:test";
import { DF, deployAndActivate, NO_SCRIPT_FLOW } from "../helpers/flows.ts";
import {
  OTHER_SCOPE,
  scopeHeaders,
  startServer,
  type TestServer,
  upload,
} from "../helpers/server.ts";
import { type Condition, onRunEvents } from "../helpers/wait.ts";

const ORDERS = {
  orders: [
    { amount: 2, qty: 3 },
    { amount: 0, qty: 9 },
    { amount: 5, qty: 1 },
  ],
};

describe("flow runs", () => {
  let server: TestServer;
  let hook: http.Server;
  let hookUrl = "";
  /** Changes with every run event of the server: waits re-read the store only then. */
  let runEvents: Condition;
  const h = scopeHeaders();
  const call = (method: string, p: string, body?: unknown, headers: Record<string, string> = h) =>
    server.call(method, DF + p, { headers, body });

  before(async () => {
    server = await startServer();
    runEvents = onRunEvents(server.services.events);
    hook = http.createServer((req, res) => {
      let body = "";
      req.on("data", (c) => (body += c));
      req.on("end", () => {
        res.setHeader("content-type", "application/json");
        res.end(JSON.stringify({ seen: JSON.parse(body || "null"), path: req.url }));
      });
    });
    await new Promise<void>((r) => hook.listen(0, "127.0.0.1", r));
    hookUrl = `http://127.0.0.1:${(hook.address() as AddressInfo).port}`;
    await upload(
      server,
      [
        {
          name: "score.py",
          content:
            "def main(rows):\n    print('scoring', len(rows))\n    return [dict(r, score=r['total'] * 10) for r in rows]\n",
        },
      ],
      { path: "/ml" },
    );
    await deployAndActivate(server, "plain", NO_SCRIPT_FLOW);
    await deployAndActivate(
      server,
      "scored",
      {
        vertexes: [
          ...NO_SCRIPT_FLOW.vertexes.slice(0, 2),
          {
            id: "score",
            type: "script",
            config: { element: { elementName: "score", path: "/ml" } },
          },
          { id: "out", type: "output" },
        ],
        edges: [
          { source: "in", target: "clean" },
          { source: "clean", target: "score" },
          { source: "score", target: "out" },
        ],
      },
      { runNameTemplate: "${elementName}-${param.tag}-v${version}" },
    );
    await deployAndActivate(
      server,
      "inline",
      {
        vertexes: [
          { id: "in", type: "input" },
          {
            id: "py",
            type: "script",
            config: { code: "def main(p):\n    return helper(p['n'])\n" },
          },
        ],
        edges: [{ source: "in", target: "py" }],
      },
      { prelude: "def helper(n):\n    return n * 3\n" },
    );
    await deployAndActivate(server, "sleepy", {
      vertexes: [
        { id: "in", type: "input" },
        {
          id: "py",
          type: "script",
          config: {
            code: "import time\ndef main(p):\n    time.sleep(p.get('s', 30))\n    return 'late'\n",
          },
        },
      ],
      edges: [{ source: "in", target: "py" }],
    });
    await deployAndActivate(server, "files", {
      vertexes: [
        { id: "in", type: "input" },
        {
          id: "write",
          type: "script",
          config: {
            code: "import os\ndef main(p):\n    open('note.txt', 'w').write('a')\n    return os.getuid()\n",
          },
        },
        {
          id: "append",
          type: "script",
          config: {
            code: "import os\ndef main(uid):\n    with open('note.txt', 'a') as f:\n        f.write('b')\n    return {'text': open('note.txt').read(), 'same_uid': uid == os.getuid()}\n",
          },
        },
      ],
      edges: [
        { source: "in", target: "write" },
        { source: "write", target: "append" },
      ],
    });
    await deployAndActivate(server, "failing", {
      vertexes: [
        { id: "in", type: "input" },
        {
          id: "py",
          type: "script",
          config: { code: "def main(p):\n    raise RuntimeError('no stock')\n" },
        },
      ],
      edges: [{ source: "in", target: "py" }],
    });
    await deployAndActivate(server, "caller", {
      vertexes: [
        { id: "in", type: "input" },
        {
          id: "call",
          type: "http",
          config: { method: "POST", url: `${hookUrl}/hook/{{kind}}`, body: { n: "{{n}}" } },
        },
      ],
      edges: [{ source: "in", target: "call" }],
    });
    await deployAndActivate(server, "parent", {
      vertexes: [
        { id: "in", type: "input" },
        { id: "child", type: "subflow", config: { element: { elementName: "sleepy" } } },
      ],
      edges: [{ source: "in", target: "child" }],
    });
  });
  after(async () => {
    await server.close();
    hook.close();
  });

  it("run-sync of a no-script flow answers the result with x-run-id", async () => {
    const r = await call("POST", "/run-sync", { elementName: "plain", parameter: ORDERS });
    assert.deepEqual(r.body.data, [
      { amount: 2, qty: 3, total: 6 },
      { amount: 5, qty: 1, total: 5 },
    ]);
    const runId = r.headers.get("x-run-id") ?? "";
    const run = await server.services.store.getRun(null, runId);
    assert.deepEqual(
      [run?.triggerType, run?.status, run?.version, run?.elementType],
      ["SYNC", "SUCCESS", "1", "DPL"],
    );
  });

  it("runs a script element node and names the run from the template", async () => {
    const r = await call("POST", "/run-sync", {
      elementName: "scored",
      parameter: { ...ORDERS, tag: "nightly" },
    });
    assert.deepEqual(
      r.body.data.map((x: { score: number }) => x.score),
      [60, 50],
    );
    const run = await server.services.store.getRun(null, r.headers.get("x-run-id") ?? "");
    assert.equal(run?.runName, "scored-nightly-v1");
    const nodes = (run?.detail?.nodes ?? []) as { nodeId: string; stdout?: string }[];
    assert.match(nodes.find((n) => n.nodeId === "score")?.stdout ?? "", /scoring 2/);
  });

  it("script nodes of one run share its directory, each as a uid of its own", async () => {
    const r = await call("POST", "/run-sync", { elementName: "files", parameter: {} });
    assert.deepEqual(r.body.data, { text: "ab", same_uid: process.getuid?.() !== 0 });
  });

  it("prepends the prelude to inline code", async () => {
    assert.equal(
      (await call("POST", "/run-sync", { elementName: "inline", parameter: { n: 5 } })).body.data,
      15,
    );
  });

  it("calls http nodes with templates", async () => {
    const r = await call("POST", "/run-sync", {
      elementName: "caller",
      parameter: { kind: "a", n: 4 },
    });
    assert.deepEqual(r.body.data, { seen: { n: 4 }, path: "/hook/a" });
  });

  it("POST /run answers a run ID; the result long-poll wakes at completion", async () => {
    const r = await call("POST", "/run", { elementName: "plain", parameter: ORDERS });
    const runId = r.body.data as string;
    assert.equal(r.headers.get("x-run-id"), runId);
    const res = await call("GET", `/run/${runId}/result?timeout=5`);
    assert.equal(res.body.data.length, 2);
    const run = await server.services.store.getRun(null, runId);
    assert.equal(run?.triggerType, "ASYNC");
  });

  it("runs by elementId and inProcess", async () => {
    const [el] = await server.services.store.findElements(
      { app: h.app, space: h.space },
      { type: "DPL", name: "plain" },
    );
    const r = await call("POST", "/run", {
      elementId: Number(el?.id),
      parameter: ORDERS,
      inProcess: true,
    });
    const res = await call("GET", `/run/${r.body.data}/result?timeout=5`);
    assert.equal(res.body.status, true);
    const run = await server.services.store.getRun(null, r.body.data);
    assert.equal(run?.inProcess, true);
  });

  it("input schema mismatch is 400 and creates no run", async () => {
    const r = await call("POST", "/run", { elementName: "plain", parameter: { nothing: 1 } });
    assert.deepEqual([r.body.code, /orders/.test(r.body.message)], [400, true]);
  });

  it("unfinished result is 28020003; run-sync wait elapsed is 28020006 and the run goes on", async () => {
    const r = await call("POST", "/run-sync", {
      elementName: "sleepy",
      parameter: { s: 1.5 },
      timeout: 1,
    });
    assert.equal(r.body.code, 28020006);
    const runId = r.headers.get("x-run-id") ?? "";
    assert.ok(runId);
    assert.equal((await call("GET", `/run/${runId}/result`)).body.code, 28020003);
    assert.equal((await call("GET", `/run/${runId}/result?timeout=5`)).body.data, "late");
  });

  it("a failed run is 28020004 with the error summary", async () => {
    const r = await call("POST", "/run-sync", { elementName: "failing", parameter: {} });
    assert.equal(r.body.code, 28020004);
    assert.match(r.body.message, /py: RuntimeError: no stock/);
  });

  it("terminate kills the script, cascades to child runs, and answers per run ID", async () => {
    const p = await call("POST", "/run", { elementName: "parent", parameter: { s: 60 } });
    const parentId = p.body.data as string;
    const child = (
      await runEvents.readUntil(
        () => server.services.store.childRuns(parentId),
        (children) => children[0]?.status === "STARTED",
        "the child run started",
        5000,
      )
    )[0];
    assert.ok(child, "child run started");
    const t = await call("POST", "/run/terminate", { runIds: [parentId, "unknown"] });
    assert.deepEqual(t.body.data, { [parentId]: true, unknown: false });
    assert.equal((await call("GET", `/run/${parentId}/result`)).body.code, 28020005);
    const childRun = await server.services.store.getRun(null, child.id);
    assert.deepEqual(
      [childRun?.status, childRun?.triggerType, childRun?.parentRunId],
      ["CANCELED", "API", parentId],
    );
    const parentRun = await server.services.store.getRun(null, parentId);
    assert.ok(parentRun?.initiator?.userId, "the parent names its user");
    assert.deepEqual(childRun?.initiator, parentRun?.initiator, "the child runs for the same user");
    const again = await call("POST", "/run/terminate", { runIds: [parentId] });
    assert.equal(again.body.data[parentId], false);
  });

  it("a parent terminated while its sub-flow run is being recorded terminates that run too", async () => {
    // The child's record is held back on its way to the store: the terminate's cascade reads the
    // parent's children before it is there, and the abort must still reach the child.
    const store = server.services.store as unknown as {
      insertRun: (
        run: { id: string; parentRunId: string | null },
        ...rest: unknown[]
      ) => Promise<void>;
    };
    const insertRun = store.insertRun;
    let release!: () => void;
    const gate = new Promise<void>((r) => {
      release = r;
    });
    let recorded: Promise<void> | undefined;
    const asked = new Promise<{ id: string; parentRunId: string | null }>((resolve) => {
      store.insertRun = (run, ...rest) => {
        const insert = () => insertRun.call(server.services.store, run, ...rest);
        if (run.parentRunId === null) return insert();
        resolve(run);
        recorded = gate.then(insert);
        return recorded;
      };
    });
    try {
      const p = await call("POST", "/run", { elementName: "parent", parameter: { s: 30 } });
      const parentId = p.body.data as string;
      const child = await asked;
      assert.equal(child.parentRunId, parentId);
      const t = await call("POST", "/run/terminate", { runIds: [parentId] });
      assert.deepEqual(t.body.data, { [parentId]: true });
    } finally {
      store.insertRun = insertRun;
      release();
    }
    await recorded;
    const ended = await server.services.flows.waitForEnd(null, (await asked).id, 15);
    assert.equal(ended?.status, "CANCELED", "the sub-flow run does not go on for 30 s");
  });

  it("delete removes finished runs only", async () => {
    const done = await call("POST", "/run-sync", { elementName: "plain", parameter: ORDERS });
    const doneId = done.headers.get("x-run-id") ?? "";
    const live = await call("POST", "/run", { elementName: "sleepy", parameter: { s: 30 } });
    const r = await call("POST", "/run/delete", { runIds: [doneId, live.body.data, "nope"] });
    assert.deepEqual(r.body.data, { [doneId]: true, [live.body.data]: false, nope: false });
    assert.equal((await call("GET", `/run/${doneId}/result`)).body.code, 28020002);
    await call("POST", "/run/terminate", { runIds: [live.body.data] });
  });

  it("not runnable unless APPROVED (28020001)", async () => {
    await call("POST", "/flow/deactivate", { elementName: "inline" });
    const r = await call("POST", "/run", { elementName: "inline", parameter: { n: 1 } });
    assert.equal(r.body.code, 28020001);
    assert.match(r.body.message, /OBSOLETE/);
    await call("POST", "/flow/activate", { elementName: "inline" });
  });

  it("another space can neither run, read nor terminate", async () => {
    const other = scopeHeaders(OTHER_SCOPE);
    assert.equal(
      (await call("POST", "/run", { elementName: "plain", parameter: ORDERS }, other)).body.code,
      28010001,
    );
    const mine = await call("POST", "/run", { elementName: "plain", parameter: ORDERS });
    assert.equal(
      (await call("GET", `/run/${mine.body.data}/result?timeout=1`, undefined, other)).body.code,
      28020002,
    );
    assert.equal(
      (await call("POST", "/run/delete", { runIds: [mine.body.data] }, other)).body.data[
        mine.body.data
      ],
      false,
    );
  });
});
