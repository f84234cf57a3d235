import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { Worker } from "node:worker_threads";
import { systemClock } from "../../src/clock.ts";
import { createProgressHub, type ProgressHub } from "../../src/progress/hub.ts";
import { type PgProgressRelay, startPgProgressRelay } from "../../src/progress/pg-relay.ts";
import type { ProgressEvent } from "../../src/progress/types.ts";
import { createRunEvents, type RunEvents } from "../../src/runs/run-events.ts";
import { startPostgres } from "../helpers/pg.ts";
import { condition, within } from "../helpers/wait.ts";

/** PostgreSQL refuses a NOTIFY payload of 8000 bytes or more. */
const PG_LIMIT = 8000;
const logger = { warn: () => {} };

/**
 * Runs `relayPayloads` in a worker thread, so that a payload split that never ends fails the test
 * at its deadline instead of blocking this process.
 */
function payloadsInWorker(messages: unknown[]): Promise<string[]> {
  const url = new URL("../../src/progress/pg-relay.ts", import.meta.url).href;
  const worker = new Worker(
    `const { parentPort, workerData } = require("node:worker_threads");
     import(${JSON.stringify(url)}).then((m) =>
       parentPort.postMessage(m.relayPayloads("tag", workerData)));`,
    { eval: true, workerData: messages },
  );
  const done = new Promise<string[]>((resolve, reject) => {
    worker.once("message", resolve);
    worker.once("error", reject);
  });
  return within(done, 5000, "the relay's payloads").finally(() => void worker.terminate());
}

/**
 * docs/live-progress.md, "In a cluster": what a tenant's flow controls (its node IDs, the error
 * text its script raises) must neither stall the node executing the run nor keep other runs'
 * progress from crossing.
 */
describe("progress relay payloads (tenant-sized node IDs and errors)", () => {
  it("an output event of a node with a very long ID is split in bounded time, under the limit", async () => {
    const longId = "n".repeat(8000);
    const e: ProgressEvent = {
      kind: "output",
      nodeId: longId,
      stream: "stdout",
      text: "hi",
      seq: 1,
    };
    const payloads = await payloadsInWorker([{ r: "run-1", s: null, e: [e] }]);
    for (const p of payloads) assert.ok(Buffer.byteLength(p) < PG_LIMIT, `${p.length} bytes`);
  });

  it("a node state with a long error or ID fits, in events and in a snapshot", async () => {
    const big = { nodeId: "bad", nodeType: "script", status: "FAILURE", error: "x".repeat(20_000) };
    const longId = { nodeId: "n".repeat(9000), nodeType: "script", status: "RUNNING" };
    const payloads = await payloadsInWorker([
      {
        r: "run-1",
        s: { seq: 2, nodes: [big, longId] },
        e: [
          { kind: "node", node: big, seq: 1 },
          { kind: "node", node: longId, seq: 2 },
        ],
      },
    ]);
    for (const p of payloads) assert.ok(Buffer.byteLength(p) < PG_LIMIT, `${p.length} bytes`);
    const text = payloads.join("\n");
    assert.match(text, /"nodeId":"bad"/, "the failed node still crosses, its error cut");
  });
});

describe("progress relay between two nodes", () => {
  let eventsA: RunEvents;
  let hubA: ProgressHub;
  let hubB: ProgressHub;
  const relays: PgProgressRelay[] = [];
  /** The runs node B's wants reached node A for. */
  const wanted = new Set<string>();
  const wantedOnA = condition();
  before(async () => {
    const url = await (await startPostgres()).createDatabase();
    eventsA = createRunEvents({ clock: systemClock });
    hubA = createProgressHub({ clock: systemClock, events: eventsA });
    hubB = createProgressHub({
      clock: systemClock,
      events: createRunEvents({ clock: systemClock }),
    });
    const a = hubA;
    const heardA: ProgressHub = {
      ...a,
      wanted(runId) {
        a.wanted(runId);
        wanted.add(runId);
        wantedOnA.changed();
      },
    };
    for (const hub of [heardA, hubB])
      relays.push(
        await startPgProgressRelay({ connectionString: url, hub, logger, clock: systemClock }),
      );
  });
  after(async () => {
    hubA?.close();
    hubB?.close();
    for (const r of relays) await r.close();
  });

  it("one run's huge node error does not keep another run's progress from crossing", async () => {
    const seen = new Map<string, ProgressEvent[]>();
    const changed = condition();
    const node = (nodeId: string, error?: string) => ({
      nodeId,
      nodeType: "script",
      status: error ? ("FAILURE" as const) : ("RUNNING" as const),
      ...(error ? { error } : {}),
    });
    // Node A executes both runs; node B's watchers ask for them.
    for (const runId of ["huge", "other"]) {
      eventsA.publish({ type: "started", runId, startTime: Date.now() });
      seen.set(runId, []);
      hubB.watch(runId, {
        event: (e) => {
          seen.get(runId)?.push(e);
          changed.changed();
        },
        ended: () => {},
      });
    }
    await wantedOnA.until(() => wanted.has("huge") && wanted.has("other"), "B's wants on node A");
    // In one turn: the tenant's node fails with a 20,000-character error; another run's node starts.
    eventsA.publish({
      type: "progress",
      runId: "huge",
      progress: { kind: "node", node: node("bad", "x".repeat(20_000)) },
    });
    eventsA.publish({
      type: "progress",
      runId: "other",
      progress: { kind: "node", node: node("fine") },
    });
    await changed.until(
      () => (seen.get("other") ?? []).some((e) => e.kind === "node" && e.node.nodeId === "fine"),
      "the other run's node state on node B",
    );
    await changed.until(
      () => (seen.get("huge") ?? []).some((e) => e.kind === "node" && e.node.nodeId === "bad"),
      "the failed node's state, its error cut, on node B",
    );
  });
});
