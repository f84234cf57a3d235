import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import {
  scopeHeaders,
  startServer,
  TEST_MODE,
  type TestServer,
  upload,
} from "../helpers/server.ts";
import { pollUntil } from "../helpers/wait.ts";

/**
 * What a task sends back is its own to spell: its code runs in the process that writes the result
 * line, and can write any line there (docs/script-service.md). Before, a line whose value nested
 * 100,000 arrays was parsed (JSON.parse does not recurse) and then overflowed the stack of the
 * service's JSON.stringify as the run's end was made: the run-sync answered an internal error and
 * the run stayed STARTED for good, held by the node. And in cluster mode a task that printed a NUL
 * (or raised an error whose message held one) had its end refused by PostgreSQL, which keeps no
 * U+0000 in text: an internal error, and the run left STARTED. Both in both modes.
 */

/** Writes its own result line to the result pipe (the one pipe beside stdout and stderr). */
const FORGE = `import os
def main(p):
    fds = []
    for name in os.listdir("/proc/self/fd"):
        try:
            fds.append((int(name), os.readlink(f"/proc/self/fd/{name}")))
        except OSError:
            pass
    result = [fd for fd, what in fds if fd > 2 and what.startswith("pipe:")][0]
    n = p["depth"]
    value = "[" * n + "]" * n if p["kind"] == "array" else '{"a":' * n + "1" + "}" * n
    os.write(result, ('{"ok":true,"value":' + value + '}\\n').encode())
    os._exit(0)
`;

/** A NUL in its output and in its error, as a script reading binary data may well print. */
const NUL_OUT = `import sys
def main(p):
    print("before\\0after")
    sys.stderr.write("err\\0or\\n")
    if p.get("fail"):
        raise ValueError("bad\\0byte")
    return "ok"
`;

const one = scopeHeaders({ app: "app1", space: "tenant-one", user: "mallory" });

describe(`a task's own result line and output are kept or refused, never an internal error (${TEST_MODE})`, () => {
  let server: TestServer;
  before(async () => {
    server = await startServer({});
    const r = await upload(
      server,
      [
        { name: "forge.py", content: FORGE },
        { name: "nul.py", content: NUL_OUT },
      ],
      { path: "/s" },
      one,
    );
    assert.ok(
      r.body.data.every((i: { status: number }) => i.status === 0),
      r.text,
    );
  });
  after(() => server.close());

  const runSync = (name: string, body: unknown) =>
    server.call("POST", `/script/external/${name}/run-sync?path=/s`, { headers: one, body });

  /** Starts an async task and waits for its recorded end. */
  async function ended(name: string, body: unknown) {
    const started = await server.call("POST", `/script/external/${name}/run?path=/s`, {
      headers: one,
      body,
    });
    assert.equal(started.body.status, true, started.text);
    const runId = started.body.data as string;
    const read = () =>
      server.call("GET", `/dataflow-3-0/monitor/run?runId=${runId}`, { headers: one });
    return pollUntil(
      read,
      (r) => ["SUCCESS", "FAILURE"].includes(r.body.data?.runStatus),
      `the end of task ${runId}`,
      { ms: 20_000, everyMs: 50 },
    );
  }

  for (const kind of ["array", "object"] as const)
    it(`a result nesting 100,000 ${kind === "array" ? "arrays" : "objects"} fails the task naming the nesting`, async () => {
      const body = { kind, depth: 100_000 };
      const r = await runSync("forge", body);
      assert.equal(r.headers.get("x-task-status"), "FAILURE", r.text);
      assert.match(r.body.message, /nests deeper than 512 levels/, r.text);
      const end = await ended("forge", body);
      assert.equal(end.body.data.runStatus, "FAILURE", end.text);
      assert.match(end.body.data.summary, /nests deeper than 512 levels/);
    });

  it("a result nesting 512 levels is kept", async () => {
    const r = await runSync("forge", { kind: "array", depth: 511 });
    assert.equal(r.headers.get("x-task-status"), "SUCCESS", r.text.slice(0, 200));
  });

  it("a NUL in stdout, stderr and the error is kept as U+FFFD", async () => {
    const r = await runSync("nul", {});
    assert.equal(r.headers.get("x-task-status"), "SUCCESS", r.text);
    const ok = await ended("nul", {});
    assert.equal(ok.body.data.runStatus, "SUCCESS", ok.text);
    const failed = await ended("nul", { fail: true });
    assert.equal(failed.body.data.runStatus, "FAILURE", failed.text);
    assert.match(failed.body.data.summary, /bad\uFFFDbyte/);
    const detail = await server.call(
      "GET",
      `/dataflow-3-0/monitor/run-detail?runId=${failed.body.data.runId}`,
      { headers: one },
    );
    // (The traceback is kept inside the detail's JSON, where U+0000 is an escape.)
    const text = JSON.stringify(detail.body);
    assert.match(text, /before\uFFFDafter/);
    assert.match(text, /err\uFFFDor/);
  });
});
