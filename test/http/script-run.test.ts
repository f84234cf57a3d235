import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import path from "node:path";
import { after, before, describe, it } from "node:test";
import { gzipSync } from "node:zlib";
import { SYNC_WRITE_BEHIND_MS } from "../../src/runs/write-behind.ts";
import { DF } from "../helpers/flows.ts";
import {
  OTHER_SCOPE,
  scopeHeaders,
  startServer,
  type TestServer,
  upload,
} from "../helpers/server.ts";
import { type Condition, condition, onRunEvents, pollUntil } from "../helpers/wait.ts";
import { makeZip } from "../helpers/zip.ts";

const SCRIPTS = {
  echo: "def main(p):\n    return p\n",
  boom: "def main(p):\n    raise ValueError('bad order ' + str(p.get('id')))\n",
  slow: "import time\ndef main(p):\n    print('started', flush=True)\n    time.sleep(p.get('s', 2))\n    return 'woke'\n",
  noisy:
    "import sys\ndef main():\n    print('to out')\n    print('to err', file=sys.stderr)\n    return [1, 2]\n",
  named: "def main(a, b):\n    return a + b\n",
  sized: "def main(n):\n    return 'x' * (n - 2)\n",
  bare: "def main(p):\n    raise ValueError()\n",
};
const FIXTURES = path.join(import.meta.dirname, "../fixtures/python");
const RESULT_LIMIT = 65536;

describe("script service runs", () => {
  let server: TestServer;
  /** Changes with every run event of the server: waits re-read the runs only then. */
  let runEvents: Condition;
  const h = scopeHeaders();
  before(async () => {
    server = await startServer({
      LIMIT_BODY_BYTES: "65536",
      LIMIT_RESULT_BYTES: String(RESULT_LIMIT),
    });
    runEvents = onRunEvents(server.services.events);
    const files = Object.entries(SCRIPTS).map(([name, content]) => ({
      name: `${name}.py`,
      content,
    }));
    files.push({
      name: "flood.py",
      content: readFileSync(path.join(FIXTURES, "flood.py"), "utf8"),
    });
    const r = await upload(server, files, { path: "/s" });
    assert.ok(
      r.body.data.every((i: { status: number }) => i.status === 0),
      JSON.stringify(r.body),
    );
    await upload(server, [{ name: "echo.py", content: "def main(p): return 'other folder'\n" }], {
      path: "/t",
    });
    await upload(
      server,
      [
        {
          name: "pkg.zip",
          content: makeZip([
            {
              name: "app/main.py",
              content: "import helper\ndef main(p): return helper.twice(p['n'])",
            },
            { name: "app/helper.py", content: "def twice(n): return 2 * n" },
          ]),
        },
      ],
      { path: "/s" },
    );
  });
  after(() => server.close());

  it("external run-sync answers the raw return value with task headers", async () => {
    const r = await server.call("POST", "/script/external/echo/run-sync?path=/s&taskName=nightly", {
      headers: h,
      body: { a: [1, "x"] },
    });
    assert.equal(r.status, 200);
    assert.deepEqual(r.body, { a: [1, "x"] });
    assert.equal(r.headers.get("x-task-status"), "SUCCESS");
    const taskId = r.headers.get("x-task-id") ?? "";
    const run = await server.services.store.getRun(null, taskId);
    assert.deepEqual(
      [run?.runName, run?.elementType, run?.triggerType, run?.status],
      ["nightly", "PY", "SYNC", "SUCCESS"],
    );
  });

  it("answers a script failure with the 28030001 envelope naming the exception", async () => {
    const r = await server.call("POST", "/script/external/boom/run-sync", {
      headers: h,
      body: { id: 7 },
    });
    assert.deepEqual([r.body.status, r.body.code, r.body.data], [false, 28030001, null]);
    assert.match(r.body.message, /ValueError: bad order 7/);
    assert.equal(r.headers.get("x-task-status"), "FAILURE");
  });

  it("an exception without a message is named by its type alone, as Python prints it", async () => {
    const r = await server.call("POST", "/script/external/bare/run-sync", { headers: h, body: {} });
    assert.deepEqual([r.body.code, r.body.message], [28030001, "ValueError"]);
    const run = await server.services.store.getRun(null, r.headers.get("x-task-id") ?? "");
    assert.equal(run?.summary, "ValueError");
  });

  it("locates by name across the scope: not unique without path, folderId works, both is 400", async () => {
    const dup = await server.call("POST", "/script/external/echo/run-sync", {
      headers: h,
      body: {},
    });
    assert.equal(dup.body.code, 28010002);
    const missing = await server.call("POST", "/script/external/nope/run-sync", {
      headers: h,
      body: {},
    });
    assert.equal(missing.body.code, 28010001);
    const folder = await server.services.store.folderByPath({ app: h.app, space: h.space }, "/t");
    const byFolder = await server.call(
      "POST",
      `/script/external/echo/run-sync?folderId=${folder?.id}`,
      { headers: h, body: {} },
    );
    assert.equal(byFolder.body, "other folder");
    const both = await server.call(
      "POST",
      `/script/external/echo/run-sync?folderId=${folder?.id}&path=/t`,
      { headers: h, body: {} },
    );
    assert.equal(both.body.code, 400);
    const noFolder = await server.call("POST", "/script/external/echo/run-sync?folderId=zzz", {
      headers: h,
      body: {},
    });
    assert.equal(noFolder.body.code, 28010003);
  });

  it("runs a zip package whose entry lives in a top-level folder", async () => {
    const r = await server.call("POST", "/script/external/pkg/run-sync", {
      headers: h,
      body: { n: 21 },
    });
    assert.equal(r.body, 42);
  });

  it("runs a package zipped by macOS Finder, whose __MACOSX/ folder sits beside its own", async () => {
    const fork = "\u0000\u0005\u0016\u0007\u0000\u0002Mac OS X";
    const r = await upload(
      server,
      [
        {
          name: "finder.zip",
          content: makeZip([
            { name: "proj/main.py", content: "import helper\ndef main(p): return helper.twice(p)" },
            { name: "proj/helper.py", content: "def twice(n): return 2 * n" },
            { name: "__MACOSX/proj/._main.py", content: fork },
            { name: "__MACOSX/proj/._helper.py", content: fork },
          ]),
        },
      ],
      { path: "/s" },
    );
    assert.equal(r.body.data[0].status, 0, r.text);
    const run = await server.call("POST", "/script/external/finder/run-sync", {
      headers: h,
      body: 21,
    });
    assert.equal(run.body, 42, run.text);
  });

  it("passes named parameters as keywords", async () => {
    const r = await server.call("POST", "/script/external/named/run-sync", {
      headers: h,
      body: { a: 2, b: 3 },
    });
    assert.equal(r.body, 5);
  });

  it("decodes compressedFlag bodies and gzip content-encoding", async () => {
    const packed = gzipSync(Buffer.from(JSON.stringify({ z: 1 }))).toString("base64");
    const r = await server.call(
      "POST",
      "/script/external/echo/run-sync?path=/s&compressedFlag=true",
      { headers: h, body: packed },
    );
    assert.deepEqual(r.body, { z: 1 });
    const bad = await server.call(
      "POST",
      "/script/external/echo/run-sync?path=/s&compressedFlag=true",
      { headers: h, body: { not: "a string" } },
    );
    assert.equal(bad.body.code, 400);
    const gz = await server.call("POST", "/script/external/echo/run-sync?path=/s", {
      headers: { ...h, "content-type": "application/json", "content-encoding": "gzip" },
      raw: gzipSync(Buffer.from('{"g":true}')),
    });
    assert.deepEqual(gz.body, { g: true });
  });

  it("timeout without terminate answers 28030002 and the task goes on to its result", async () => {
    const r = await server.call("POST", "/script/external/slow/run-sync?timeout=1", {
      headers: h,
      body: { s: 1.5 },
    });
    assert.equal(r.body.code, 28030002);
    const taskId = r.headers.get("x-task-id");
    assert.ok(taskId);
    const result = await server.call("GET", `/script/script/result/${taskId}?timeout=5`, {
      headers: h,
    });
    assert.deepEqual([result.body.status, result.body.data], [true, "woke"]);
  });

  it("a run-sync longer than the write-behind grace is listed STARTED while it runs", async () => {
    const running = server.call("POST", "/script/external/slow/run-sync?path=/s&taskName=longer", {
      headers: h,
      body: { s: 1.5 },
    });
    const listed = async () => {
      const r = await server.call("POST", `${DF}/monitor/runs`, {
        headers: h,
        body: { pageNo: 0, pageSize: 50, elementName: "slow", elementType: "PY", path: "/s" },
      });
      return (r.body.data?.runs ?? []) as { runName: string; runStatus: string }[];
    };
    // The write-behind inserts it STARTED once its grace has passed: its `created` event.
    const seen = (
      await runEvents.readUntil(
        listed,
        (runs) => runs.some((x) => x.runName === "longer"),
        "the run-sync is listed",
        1000 + SYNC_WRITE_BEHIND_MS,
      )
    ).find((x) => x.runName === "longer")?.runStatus;
    assert.equal(seen, "STARTED");
    const r = await running;
    assert.equal(r.headers.get("x-task-status"), "SUCCESS");
    assert.equal((await listed()).find((x) => x.runName === "longer")?.runStatus, "SUCCESS");
  });

  it("timeout with terminateOnTimeout kills the script and the task ends FAILURE", async () => {
    const r = await server.call(
      "POST",
      "/script/external/slow/run-sync?timeout=1&terminateOnTimeout=true",
      { headers: h, body: { s: 30 } },
    );
    assert.equal(r.body.code, 28030002);
    assert.match(r.body.message, /was killed/);
    // The answer comes after the kill: it carries the status the store recorded, not STARTED.
    assert.equal(r.headers.get("x-task-status"), "FAILURE");
    const taskId = r.headers.get("x-task-id");
    const life = await server.call("GET", `/script/script/lifespan/${taskId}?timeout=5`, {
      headers: h,
    });
    assert.equal(life.body.data.success, false);
    assert.match(life.body.data.stdout, /started/);
    const run = await server.services.store.getRun(null, taskId ?? "");
    assert.equal(run?.status, "FAILURE");
    // It says which wait killed it, not a bare "task timed out" that reads as a limit of its own.
    const why = "Timeout: killed when the caller's wait of 1 s elapsed (terminateOnTimeout)";
    assert.equal(run?.summary, why);
    assert.ok(life.body.data.stderr.endsWith(why), life.body.data.stderr);
  });

  it("a result at LIMIT_RESULT_BYTES is answered, one byte more is ResultTooLarge", async () => {
    const at = await server.call("POST", "/script/external/sized/run-sync", {
      headers: h,
      body: RESULT_LIMIT,
    });
    assert.equal(at.headers.get("x-task-status"), "SUCCESS");
    assert.equal((at.body as string).length, RESULT_LIMIT - 2);
    const over = await server.call("POST", "/script/external/sized/run-sync", {
      headers: h,
      body: RESULT_LIMIT + 1,
    });
    assert.equal(over.body.code, 28030001);
    assert.match(over.body.message, /ResultTooLarge: the return value is 65537 bytes/);
  });

  it("a task flooding its result pipe is killed with ResultTooLarge; the service answers on", async () => {
    const t0 = Date.now();
    const r = await server.call("POST", "/script/external/flood/run-sync", {
      headers: h,
      body: { to: "result", mb: 300 },
    });
    assert.equal(r.body.code, 28030001, JSON.stringify(r.body));
    assert.match(r.body.message, /ResultTooLarge: .*over the 65536 byte limit.*was killed/);
    assert.equal(r.headers.get("x-task-status"), "FAILURE");
    assert.ok(Date.now() - t0 < 10_000);
    const next = await server.call("POST", "/script/external/echo/run-sync?path=/s", {
      headers: h,
      body: { up: true },
    });
    assert.deepEqual(next.body, { up: true });
  });

  it("a task flooding stdout is killed with OutputTooLarge and keeps its capped output", async () => {
    const r = await server.call("POST", "/script/external/flood/run", {
      headers: h,
      body: { to: "stdout", mb: 100 },
    });
    const life = await server.call("GET", `/script/script/lifespan/${r.body.data}?timeout=20`, {
      headers: h,
    });
    assert.equal(life.body.data.success, false);
    assert.match(life.body.data.stderr, /OutputTooLarge: stdout passed \d+ bytes/);
    assert.match(life.body.data.stdout, /output truncated/);
    assert.ok(life.body.data.stdout.length < 1024 * 1024 + 100);
  });

  it("external run answers a task ID; result and lifespan wait for it", async () => {
    const r = await server.call("POST", "/script/external/noisy/run", { headers: h, body: {} });
    assert.equal(r.body.status, true);
    const taskId = r.body.data as string;
    assert.equal(r.headers.get("x-task-id"), taskId);
    const res = await server.call("GET", `/script/script/result/${taskId}?timeout=5`, {
      headers: h,
    });
    assert.deepEqual(res.body.data, [1, 2]);
    const life = await server.call("GET", `/script/script/lifespan/${taskId}`, { headers: h });
    assert.deepEqual(life.body.data, {
      success: true,
      retval: [1, 2],
      stdout: "to out\n",
      stderr: "to err\n",
    });
  });

  it("result lookups: unknown 28030003, unfinished 28030004, failed 28030001, canceled 28030005", async () => {
    assert.equal(
      (await server.call("GET", "/script/script/result/nope", { headers: h })).body.code,
      28030003,
    );
    const slow = await server.call("POST", "/script/script/run", {
      headers: h,
      body: { elementName: "slow", parameter: { s: 30 } },
    });
    const id = slow.body.data as string;
    const early = await server.call("GET", `/script/script/result/${id}`, { headers: h });
    assert.equal(early.body.code, 28030004);
    const lifeEarly = await server.call("GET", `/script/script/lifespan/${id}?timeout=0`, {
      headers: h,
    });
    assert.equal(lifeEarly.body.code, 28030004);
    const run = await server.services.store.getRun(null, id);
    assert.ok(run);
    assert.equal(await server.services.tasks.terminate(run), true);
    assert.equal(
      (await server.call("GET", `/script/script/result/${id}`, { headers: h })).body.code,
      28030005,
    );
    const life = await server.call("GET", `/script/script/lifespan/${id}`, { headers: h });
    assert.equal(life.body.data.success, false);
    const boom = await server.call("POST", "/script/script/run", {
      headers: h,
      body: { elementName: "boom", parameter: {} },
    });
    const failed = await server.call("GET", `/script/script/result/${boom.body.data}?timeout=5`, {
      headers: h,
    });
    assert.equal(failed.body.code, 28030001);
  });

  it("a terminated task keeps what it printed before it was killed", async () => {
    const printed = new Set<string>();
    const output = condition();
    server.services.events.subscribe((e) => {
      if (e.type !== "progress") return;
      printed.add(e.runId);
      output.changed();
    });
    const started = await server.call("POST", "/script/script/run", {
      headers: h,
      body: { elementName: "slow", parameter: { s: 30 } },
    });
    const id = started.body.data as string;
    await output.until(() => printed.has(id), "the task printed");
    const t = await server.call("POST", `${DF}/run/terminate`, {
      headers: h,
      body: { runIds: [id] },
    });
    assert.equal(t.body.data[id], true, t.text);
    // Recorded CANCELED at once; its output is added once its process is gone.
    const run = await pollUntil(
      () => server.services.store.getRun(null, id),
      (r) => r?.stdout != null,
      "the terminated task's output is kept",
    );
    assert.equal(run?.status, "CANCELED");
    assert.equal(run?.stdout, "started\n");
    const life = await server.call("GET", `/script/script/lifespan/${id}`, { headers: h });
    assert.deepEqual(
      [life.body.data.success, life.body.data.stdout, life.body.data.stderr],
      [false, "started\n", "terminated by request"],
    );
  });

  it("internal run-sync wraps the value in the envelope", async () => {
    const r = await server.call("POST", "/script/script/run-sync", {
      headers: h,
      body: { elementName: "echo", path: "/s", parameter: { k: "v" } },
    });
    assert.deepEqual(r.body, { status: true, code: 0, message: "success", data: { k: "v" } });
    const missing = await server.call("POST", "/script/script/run-sync", {
      headers: h,
      body: { parameter: {} },
    });
    assert.equal(missing.body.code, 400);
    assert.match(missing.body.message, /elementName/);
  });

  it("another space sees neither the elements nor the tasks", async () => {
    const r = await server.call("POST", "/script/external/noisy/run", { headers: h, body: {} });
    const other = scopeHeaders(OTHER_SCOPE);
    assert.equal(
      (
        await server.call("GET", `/script/script/result/${r.body.data}?timeout=2`, {
          headers: other,
        })
      ).body.code,
      28030003,
    );
    assert.equal(
      (await server.call("POST", "/script/external/noisy/run-sync", { headers: other, body: {} }))
        .body.code,
      28010001,
    );
  });
});
