import assert from "node:assert/strict";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { after, before, describe, it } from "node:test";
import pino from "pino";
import { type Clock, systemClock } from "../../src/clock.ts";
import type { RunQueue } from "../../src/queue/types.ts";
import { createRecovery, NODE_ROWS_KEPT_MS } from "../../src/runs/recovery.ts";
import { createRunEvents } from "../../src/runs/run-events.ts";
import { type OpenedStore, openStore } from "../../src/store/open-store.ts";

/**
 * docs/cluster.md, "Heartbeats": every process start writes a node row, and a node's beats
 * delete the rows of nodes silent for a day, at most once an hour, so the table holds the nodes
 * of the last day rather than every start ever.
 */
describe("rows of long-gone nodes", () => {
  let store: OpenedStore;
  let dataDir: string;

  before(async () => {
    dataDir = fs.mkdtempSync(path.join(os.tmpdir(), "sluice-recovery-forget-"));
    store = await openStore({ dataDir });
  });

  after(async () => {
    await store?.close();
    fs.rmSync(dataDir, { recursive: true, force: true });
  });

  const nodeIds = async () =>
    (await store.db.selectFrom("nodes").select("id").orderBy("id").execute()).map((r) => r.id);

  let now = Date.UTC(2026, 0, 1);
  const clock: Clock = { ...systemClock, now: () => now };
  const recovery = (nodeId: string, heartbeatTimeoutMs = 3000) =>
    createRecovery({
      store,
      queue: {} as RunQueue,
      events: createRunEvents({ clock }),
      clock,
      logger: pino({ level: "silent" }),
      nodeId,
      sharedDatabase: true,
      heartbeatMs: 1000,
      heartbeatTimeoutMs,
      requeue: false,
    });

  it("are deleted by a beat a day later, once an hour at most; the live ones stay", async () => {
    // Three earlier starts of the service, each beating once.
    for (const id of ["start-1", "start-2", "start-3"]) await recovery(id).sweep();
    const current = recovery("start-4");
    now += NODE_ROWS_KEPT_MS - 1000;
    await current.sweep();
    assert.deepEqual(await nodeIds(), ["start-1", "start-2", "start-3", "start-4"]);
    // Past the day: the next pass may run (the first one ran at this node's first beat).
    now += 2000;
    await store.heartbeat("start-3", now); // start-3 still beats: it stays
    await current.sweep();
    assert.deepEqual(
      await nodeIds(),
      ["start-1", "start-2", "start-3", "start-4"],
      "within the hour",
    );
    now += 3600_000;
    await current.sweep();
    assert.deepEqual(await nodeIds(), ["start-3", "start-4"]);
  });

  it("a failed delete is logged and retried an hour later: the start and the beats go on", async () => {
    // Housekeeping: before, its error failed the embedded start (recoverAtStart) and skipped the
    // rest of a beat (the dead nodes' runs).
    let fails = true;
    let tried = 0;
    const errors: string[] = [];
    const flaky = new Proxy(store, {
      get(target, key, receiver) {
        if (key !== "forgetNodes") return Reflect.get(target, key, receiver);
        return async (kept: Parameters<OpenedStore["forgetNodes"]>[0]) => {
          tried++;
          if (fails) throw new Error("the database said no");
          return target.forgetNodes(kept);
        };
      },
    });
    const logger = pino({ level: "error" }, { write: (line: string) => void errors.push(line) });
    const rec = createRecovery({
      store: flaky,
      queue: {} as RunQueue,
      events: createRunEvents({ clock }),
      clock,
      logger,
      nodeId: "flaky",
      sharedDatabase: false,
      heartbeatMs: 1000,
      heartbeatTimeoutMs: 3000,
      requeue: false,
    });
    await rec.recoverAtStart();
    assert.equal(tried, 1);
    assert.equal(errors.length, 1, "logged");
    assert.match(errors[0] as string, /the database said no/);
    assert.ok((await nodeIds()).includes("flaky"), "the beat was written");
    fails = false;
    await rec.sweep();
    assert.equal(tried, 1, "not again within the hour");
    now += 3600_000;
    await rec.sweep();
    assert.equal(tried, 2, "again an hour later");
  });

  it("are kept while HEARTBEAT_TIMEOUT_MS, longer than the day, has not passed", async () => {
    // Such a node silent for more than a day is alive by the rules (its STARTED runs are its
    // own): before, its row went after the day, and so its runs and owed notifications.
    const timeoutMs = 2 * NODE_ROWS_KEPT_MS;
    await recovery("slow-1", timeoutMs).sweep();
    const slow2 = recovery("slow-2", timeoutMs);
    now += NODE_ROWS_KEPT_MS + 3600_000;
    await slow2.sweep();
    assert.ok((await nodeIds()).includes("slow-1"), "silent past the day, within the timeout");
    now += NODE_ROWS_KEPT_MS;
    await slow2.sweep();
    assert.ok(!(await nodeIds()).includes("slow-1"), "silent past the timeout");
  });
});
