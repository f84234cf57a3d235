import assert from "node:assert/strict";
import http from "node:http";
import type { AddressInfo } from "node:net";
import net from "node:net";
import { describe, it } from "node:test";
import { CLIENT_QUEUE_BYTES, openSse } from "../../src/http/sse.ts";
import { createProgressHub, type ProgressRelay } from "../../src/progress/hub.ts";
import { PROGRESS_LIMITS, type ProgressEvent } from "../../src/progress/types.ts";
import { createRunEvents } from "../../src/runs/run-events.ts";
import { createStreamMasker } from "../../src/secrets/mask-stream.ts";
import { createFakeClock } from "../scheduler/fake-clock.ts";

const out = (text: string, stream: "stdout" | "stderr" = "stdout") => ({
  kind: "output" as const,
  stream,
  text,
});

describe("live progress hub (docs/live-progress.md)", () => {
  it("coalesces a burst of output per stream into one bounded event, noting the rest", () => {
    const clock = createFakeClock();
    const events = createRunEvents({ clock });
    const hub = createProgressHub({ clock, events });
    const seen: ProgressEvent[] = [];
    hub.watch("r1", { event: (e) => seen.push(e), ended: () => {} });
    for (let i = 0; i < 100; i++)
      events.publish({ type: "progress", runId: "r1", progress: out(`${"x".repeat(49)}\n`) });
    assert.equal(seen.length, 0, "nothing before the coalescing window ends");
    clock.advance(PROGRESS_LIMITS.coalesceMs);
    assert.equal(seen.length, 1);
    const e = seen[0] as Extract<ProgressEvent, { kind: "output" }>;
    assert.ok(e.text.startsWith("x".repeat(49)));
    assert.match(e.text, /\[3000 characters not shown live\]/);
    hub.close();
  });

  it("a node's state flushes its output first; numbers only grow; a late poll gets a gap", () => {
    const clock = createFakeClock();
    const events = createRunEvents({ clock });
    const hub = createProgressHub({ clock, events });
    const node = (status: "RUNNING" | "SUCCESS") => ({
      type: "progress" as const,
      runId: "r2",
      progress: { kind: "node" as const, node: { nodeId: "a", nodeType: "script", status } },
    });
    events.publish(node("RUNNING"));
    events.publish({ type: "progress", runId: "r2", progress: out("hello\n") });
    events.publish(node("SUCCESS"));
    const first = hub.poll("r2", 0);
    assert.deepEqual(
      first.events.map((e) => [e.kind, e.seq]),
      [
        ["node", 1],
        ["output", 2],
        ["node", 3],
      ],
    );
    assert.equal(first.snapshot.nodes[0]?.status, "SUCCESS");
    for (let i = 0; i < PROGRESS_LIMITS.ringEvents + 10; i++) events.publish(node("RUNNING"));
    const late = hub.poll("r2", 1);
    assert.equal(late.events[0]?.kind, "gap");
    assert.equal(late.events.length, PROGRESS_LIMITS.ringEvents + 1);
    hub.close();
  });

  it("answers another node's want with its state, relays while wanted, and a mirror follows", () => {
    const clock = createFakeClock();
    const workerEvents = createRunEvents({ clock });
    const apiEvents = createRunEvents({ clock });
    const worker = createProgressHub({ clock, events: workerEvents });
    const api = createProgressHub({ clock, events: apiEvents });
    const wants: string[] = [];
    api.setRelay({ want: (id) => wants.push(id), send: () => {} });
    const wire: ProgressRelay = { want: () => {}, send: (id, s, e) => api.accept(id, s, e) };
    worker.setRelay(wire);
    workerEvents.publish({ type: "started", runId: "r3", startTime: clock.now() });
    const seen: ProgressEvent[] = [];
    api.watch("r3", { event: (e) => seen.push(e), ended: () => {} });
    assert.deepEqual(wants, ["r3"]);
    worker.wanted("r3");
    workerEvents.publish({ type: "progress", runId: "r3", progress: out("on worker\n") });
    clock.advance(PROGRESS_LIMITS.coalesceMs);
    assert.ok(seen.some((e) => e.kind === "output" && e.text === "on worker\n"));
    assert.equal(api.snapshot("r3")?.seq, 1);
    worker.close();
    api.close();
  });
});

describe("live output masking (docs/secrets.md)", () => {
  it("masks a value split over chunks and releases a held tail that was no value", () => {
    const m = createStreamMasker(["s3cr3t-value"]);
    let text = m.push("token s3cr");
    assert.equal(text, "token ");
    text += m.push("3t-value and s3");
    text += m.push("x\n");
    text += m.end();
    assert.equal(text, "token *** and s3x\n");
  });
});

describe("event stream to a slow client", () => {
  it("drops the oldest events past its queue and says how many", async () => {
    let sse: ReturnType<typeof openSse> | undefined;
    const ready = Promise.withResolvers<void>();
    const server = http.createServer((_req, res) => {
      sse = openSse(res, { clock: createFakeClock(), heartbeatMs: 60_000, onClose: () => {} });
      ready.resolve();
    });
    await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
    const port = (server.address() as AddressInfo).port;
    // A client that sends its request, then does not read.
    const sock = net.connect(port, "127.0.0.1");
    sock.write("GET / HTTP/1.1\r\nHost: x\r\n\r\n");
    sock.pause();
    await ready.promise;
    const big = "y".repeat(32 * 1024);
    const n = 800;
    for (let i = 1; i <= n; i++) sse?.send({ event: "output", data: { text: big }, id: i });
    sse?.send({ event: "end", data: { last: true } });
    sse?.end();
    let got = "";
    sock.setEncoding("utf8");
    sock.on("data", (d: string) => {
      got += d;
    });
    sock.resume();
    await new Promise((r) => sock.once("end", r));
    server.close();
    const gap = /event: gap\ndata: \{"dropped":(\d+)\}/.exec(got);
    assert.ok(gap, "no gap message");
    const dropped = Number(gap[1]);
    const ids = [...got.matchAll(/^id: (\d+)$/gm)].map((m) => Number(m[1]));
    assert.equal(ids.length + dropped, n, "every event either sent or counted as dropped");
    assert.ok(ids.length < n);
    assert.equal(ids.at(-1), n, "the newest events are the ones kept");
    assert.match(got, /event: end/);
    // What waited in the queue (after the gap) fits the byte budget, not just the count of 256.
    const queued = [...got.slice(gap.index).matchAll(/^id: (\d+)$/gm)].length;
    assert.ok(
      queued <= Math.floor(CLIENT_QUEUE_BYTES / big.length),
      `${queued} events of 32 KiB queued for a client that did not read`,
    );
  });
});
