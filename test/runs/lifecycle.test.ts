import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import type { RunEvent } from "../../src/runs/run-events.ts";
import { DF, deployAndActivate, NO_SCRIPT_FLOW } from "../helpers/flows.ts";
import { scopeHeaders, startServer, type TestServer, upload } from "../helpers/server.ts";

/** The events of one run, in the order they were published. */
function recorder(server: TestServer) {
  const seen: RunEvent[] = [];
  server.services.events.subscribe((e) => seen.push(e));
  const idOf = (e: RunEvent) => ("run" in e && e.type === "created" ? e.run.id : e.runId);
  return {
    of: (runId: string) => seen.filter((e) => idOf(e) === runId).map((e) => e.type),
    ended: (runId: string) =>
      seen.find(
        (e): e is Extract<RunEvent, { type: "ended" }> => e.type === "ended" && e.runId === runId,
      ),
  };
}

describe("one run lifecycle: events and the run-sync wait", () => {
  let server: TestServer;
  const h = scopeHeaders();
  before(async () => {
    // A 1 s server wait, so that the one run-sync rule (absent timeout: until the end, bounded
    // by MAX_WAIT_S) shows within the test, for flows and tasks alike.
    server = await startServer({ MAX_WAIT_S: "1" });
    const r = await upload(
      server,
      [
        {
          name: "nap.py",
          content: "import time\ndef main(p):\n    time.sleep(p['s'])\n    return 'woke'\n",
        },
      ],
      { path: "/s" },
    );
    assert.equal(r.body.data[0]?.status, 0, JSON.stringify(r.body));
    await deployAndActivate(server, "events-flow", NO_SCRIPT_FLOW);
  });
  after(() => server.close());

  it("an async flow run is created, then ended with its configuration; waiters wake on it", async () => {
    const events = recorder(server);
    const start = await server.call("POST", `${DF}/run`, {
      headers: h,
      body: { elementName: "events-flow", parameter: { orders: [{ amount: 1, qty: 2 }] } },
    });
    const runId = start.body.data as string;
    const result = await server.call("GET", `${DF}/run/${runId}/result?timeout=1`, { headers: h });
    assert.equal(result.body.status, true, JSON.stringify(result.body));
    const kinds = events.of(runId);
    assert.equal(kinds[0], "created");
    assert.equal(kinds.at(-1), "ended");
    assert.equal(kinds.filter((k) => k === "ended").length, 1, "one end, published once");
    const ended = events.ended(runId);
    assert.equal(ended?.end.status, "SUCCESS");
    assert.equal(ended?.run?.elementType, "DPL");
    assert.ok(ended?.configure, "a flow's end carries its release configuration");
  });

  it("a submitted task is created and ended once; a terminate publishes the CANCELED end", async () => {
    const events = recorder(server);
    // Queued (cluster) or started in a free slot at once (embedded): `started` only in the first.
    const submit = await server.call("POST", "/script/external/nap/run?path=/s", {
      headers: h,
      body: { s: 30 },
    });
    const taskId = submit.headers.get("x-task-id") ?? (submit.body.data as string);
    assert.ok(taskId, JSON.stringify(submit.body));
    const run = await server.services.store.getRun(null, taskId);
    assert.ok(run);
    assert.equal(await server.services.tasks.terminate(run), true);
    const ended = await server.call("GET", `/script/script/result/${taskId}?timeout=1`, {
      headers: h,
    });
    assert.equal(ended.body.code, 28030005, JSON.stringify(ended.body));
    assert.deepEqual(
      events.of(taskId).filter((k) => k !== "started"),
      ["created", "ended"],
    );
    assert.equal(events.ended(taskId)?.end.status, "CANCELED");
  });

  it("a task run-sync without timeout waits MAX_WAIT_S, like a flow's, and the task goes on", async () => {
    const t0 = Date.now();
    const r = await server.call("POST", "/script/external/nap/run-sync?path=/s", {
      headers: h,
      body: { s: 2 },
    });
    const waited = Date.now() - t0;
    assert.equal(r.body.code, 28030002, JSON.stringify(r.body));
    assert.ok(waited >= 900 && waited < 1900, `answered after ${waited} ms`);
    const taskId = r.headers.get("x-task-id");
    assert.ok(taskId);
    // The task was not stopped: it ends by itself, SUCCESS.
    let result = await server.call("GET", `/script/script/result/${taskId}?timeout=1`, {
      headers: h,
    });
    if (result.body.code === 28030004)
      result = await server.call("GET", `/script/script/result/${taskId}?timeout=1`, {
        headers: h,
      });
    assert.deepEqual([result.body.status, result.body.data], [true, "woke"]);
  });
});
