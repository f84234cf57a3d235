import assert from "node:assert/strict";
import { randomBytes } from "node:crypto";
import { after, before, describe, it } from "node:test";
import { DF, deployAndActivate } from "../helpers/flows.ts";
import { gatedScript, release } from "../helpers/gate-file.ts";
import {
  OTHER_SCOPE,
  scopeHeaders,
  startServer,
  TEST_MODE,
  type TestServer,
  upload,
} from "../helpers/server.ts";
import { openSse } from "../helpers/sse.ts";
import { pollUntil } from "../helpers/wait.ts";

const KEY = randomBytes(32).toString("base64");
const VALUE = `sv-${randomBytes(12).toString("hex")}`;
const h = scopeHeaders();

/** Prints, then waits for the test's `go` (so it is watched while it runs), then prints again. */
const SLOW = gatedScript(["print('first line', flush=True)"], ["print('second line')"]);

/** in → work (a script that prints while it runs) → out. */
const THREE = {
  vertexes: [
    { id: "in", type: "input" },
    { id: "work", type: "script", config: { code: SLOW } },
    { id: "out", type: "output" },
  ],
  edges: [
    { source: "in", target: "work" },
    { source: "work", target: "out" },
  ],
};

const PRINTS_SECRET = [
  "# sluice-secrets: TOKEN",
  "import os, sys, time",
  "def main(p):",
  "    t = os.environ['TOKEN']",
  "    print('token is', t, flush=True)",
  // A value split over two writes is masked too.
  "    sys.stdout.write(t[:5]); sys.stdout.flush(); time.sleep(0.2)",
  "    sys.stdout.write(t[5:] + '\\n'); sys.stdout.flush()",
  "    time.sleep(1)",
  "    return 1",
].join("\n");

describe(`live progress (${TEST_MODE})`, () => {
  let server: TestServer;
  before(async () => {
    server = await startServer({ SECRETS_KEY: KEY });
    await deployAndActivate(server, "three", THREE);
    const put = await server.call("PUT", `${DF}/secret/TOKEN`, {
      headers: h,
      body: { value: VALUE },
    });
    assert.equal(put.body.status, true, put.text);
    const up = await upload(server, [{ name: "leaky.py", content: PRINTS_SECRET }], { path: "/s" });
    assert.equal(up.body.status, true, up.text);
  });
  after(async () => {
    await server?.close();
  });

  const start = async () => {
    const r = await server.call("POST", `${DF}/run`, {
      headers: h,
      body: { elementName: "three", parameter: { n: 1 } },
    });
    assert.equal(r.body.status, true, r.text);
    return r.body.data as string;
  };
  /** A run that is let finish as soon as it runs. */
  const startReleased = async () => {
    const runId = await start();
    await release(server.dataDir, runId);
    return runId;
  };

  it("streams node states and a script node's output while the run runs, then its end", async () => {
    const runId = await start();
    const sse = await openSse(`${server.url}${DF}/run/${runId}/events`, h);
    assert.equal(sse.status, 200);
    assert.match(sse.contentType ?? "", /^text\/event-stream/);
    assert.equal((await sse.next((m) => m.event === "state")).event, "state");
    const out = await sse.next((m) => m.event === "output" && /first line/.test(m.data.text));
    assert.equal(out.data.nodeId, "work");
    assert.equal(out.data.stream, "stdout");
    // Seen while the run is still going.
    const mid = await server.services.store.getRun(null, runId);
    assert.equal(mid?.status, "STARTED");
    await sse.next(
      (m) =>
        m.event === "node" && m.data.node.nodeId === "work" && m.data.node.status === "RUNNING",
    );
    await release(server.dataDir, runId);
    const end = await sse.next((m) => m.event === "end");
    assert.equal(end.data.runStatus, "SUCCESS");
    await sse.closed;
    // Every node started and ended, in order, with times.
    const states = sse.messages.filter((m) => m.event === "node").map((m) => m.data.node);
    for (const id of ["in", "work", "out"]) {
      const done = states.find((n) => n.nodeId === id && n.status === "SUCCESS");
      assert.ok(done, `no SUCCESS state of ${id}: ${JSON.stringify(states)}`);
      assert.ok(done.endTime >= done.startTime);
    }
    const seqs = sse.messages
      .filter((m) => m.id !== undefined && m.event !== "state")
      .map((m) => m.id as number);
    assert.deepEqual(
      seqs,
      [...seqs].sort((a, b) => a - b),
      "events in order",
    );
    assert.ok(sse.messages.some((m) => m.event === "output" && /second line/.test(m.data.text)));
  });

  it("answers an ended run's state and end at once, and another scope's run as not found", async () => {
    const runId = await startReleased();
    assert.equal((await server.services.flows.waitForEnd(null, runId, 60))?.status, "SUCCESS");
    const sse = await openSse(`${server.url}${DF}/run/${runId}/events`, h);
    await sse.closed;
    assert.deepEqual(
      sse.messages.map((m) => m.event),
      ["state", "end"],
    );
    assert.deepEqual(
      sse.messages[0]?.data.nodes.map((n: { status: string }) => n.status),
      ["SUCCESS", "SUCCESS", "SUCCESS"],
    );
    const other = await server.call("GET", `${DF}/run/${runId}/events`, {
      headers: scopeHeaders(OTHER_SCOPE),
    });
    assert.equal(other.body.code, 28020002, other.text);
    const poll = await server.call("GET", `${DF}/run/${runId}/progress`, {
      headers: scopeHeaders(OTHER_SCOPE),
    });
    assert.equal(poll.body.code, 28020002, poll.text);
    const bad = await server.call("GET", `${DF}/run/${runId}/progress?after=-1`, { headers: h });
    assert.equal(bad.body.code, 400, bad.text);
    assert.match(bad.body.message, /after/);
  });

  it("polling a run that ended keeps no live state for it (nor asks other nodes for it)", async () => {
    const runId = await startReleased();
    assert.equal((await server.services.flows.waitForEnd(null, runId, 60))?.status, "SUCCESS");
    await pollUntil(
      () => server.services.progress.snapshot(runId),
      (s) => s === undefined,
      "the run's live state gone",
    );
    const size = server.services.progress.size();
    for (const after of [0, 5]) {
      const r = await server.call("GET", `${DF}/run/${runId}/progress?after=${after}`, {
        headers: h,
      });
      assert.deepEqual([r.body.data.ended, r.body.data.events], [true, []], r.text);
      assert.equal(r.body.data.nodes.length, 3);
    }
    assert.equal(server.services.progress.snapshot(runId), undefined);
    assert.equal(server.services.progress.size(), size);
  });

  it("polling answers the events after a number, and the end", async () => {
    const runId = await start();
    const released = release(server.dataDir, runId);
    let after = 0;
    const seen: { kind: string; seq: number; text?: string }[] = [];
    // The client's own loop: the polling fallback is what is under test.
    const last = await pollUntil(
      async () => {
        const r = await server.call("GET", `${DF}/run/${runId}/progress?after=${after}`, {
          headers: h,
        });
        assert.equal(r.body.status, true, r.text);
        for (const e of r.body.data.events)
          assert.ok(e.seq > after, "an event not after the number");
        seen.push(...r.body.data.events);
        after = r.body.data.seq;
        return r.body.data;
      },
      (d) => d.ended,
      "the run's end through polling",
      { ms: 60_000, everyMs: 100 },
    );
    await released;
    assert.equal(last.runStatus, "SUCCESS");
    assert.equal(last.nodes.length, 3);
    assert.ok(
      seen.some((e) => e.kind === "output" && /first line/.test(e.text ?? "")),
      JSON.stringify(seen),
    );
    assert.ok(seen.some((e) => e.kind === "node"));
  });

  it("a script task's output streams through the script service, its secret masked", async () => {
    const r = await server.call("POST", "/script/script/run", {
      headers: h,
      body: { elementName: "leaky", path: "/s", parameter: 1 },
    });
    assert.equal(r.body.status, true, r.text);
    const taskId = r.body.data as string;
    const sse = await openSse(`${server.url}/script/script/events/${taskId}`, h);
    assert.equal(sse.status, 200);
    await sse.next((m) => m.event === "output" && /token is \*\*\*/.test(m.data.text));
    const end = await sse.next((m) => m.event === "end");
    assert.equal(end.data.runStatus, "SUCCESS");
    await sse.closed;
    const text = sse.messages
      .filter((m) => m.event === "output")
      .map((m) => m.data.text)
      .join("");
    assert.ok(!text.includes(VALUE), `the secret went out live: ${text}`);
    assert.ok(!text.includes(VALUE.slice(0, 5)), "the first half of a split value went out");
    assert.match(text, /token is \*\*\*\n\*\*\*\n/);
    // A flow run's ID is not a task of the script service.
    const flowRun = await startReleased();
    const wrong = await server.call("GET", `/script/script/progress/${flowRun}`, { headers: h });
    assert.equal(wrong.body.code, 28030003, wrong.text);
  });

  it("a client that goes away frees its watch; many clients of one run share one state", async () => {
    const runId = await start();
    const a = await openSse(`${server.url}${DF}/run/${runId}/events`, h);
    const b = await openSse(`${server.url}${DF}/run/${runId}/events`, h);
    await a.next((m) => m.event === "state");
    await b.next((m) => m.event === "state");
    a.abort();
    b.abort();
    await Promise.all([a.closed, b.closed]);
    await release(server.dataDir, runId);
    assert.equal((await server.services.flows.waitForEnd(null, runId, 60))?.status, "SUCCESS");
    // Nothing watches any more: the run's live state goes once it ended (the server sees the
    // sockets close a moment after the clients let go, and nothing announces it).
    await pollUntil(
      () => server.services.progress.snapshot(runId),
      (s) => s === undefined,
      "the run's live state is dropped",
      { ms: 30_000 },
    );
  });
});
