import assert from "node:assert/strict";
import os from "node:os";
import { after, before, describe, it } from "node:test";
import { type Clock, systemClock, type TimerHandle } from "../../src/clock.ts";
import { createPgQueue, type PgRunQueue } from "../../src/queue/pg-queue.ts";
import type { RunJob } from "../../src/queue/types.ts";
import { createPgNotifyBridge, type PgNotifyBridge } from "../../src/runs/pg-notify.ts";
import { createRunEvents } from "../../src/runs/run-events.ts";
import { type OpenedStore, openStore } from "../../src/store/open-store.ts";
import { startPostgres, terminateBackends } from "../helpers/pg.ts";
import { newRun } from "../helpers/runs.ts";
import { condition, gate } from "../helpers/wait.ts";

const logger = { info: () => {}, warn: () => {}, error: () => {} };

/**
 * Jobs committed on one node reach an idle lane of another at once (docs/cluster.md, "Waking
 * the lanes"): the worker here polls only every ten minutes, so a job it runs within the tests'
 * wait was announced to it, not found by a poll.
 */
describe("jobs announced across nodes", () => {
  let store: OpenedStore;
  let api: PgRunQueue;
  let worker: PgRunQueue;
  let bridge: PgNotifyBridge;
  const seen: RunJob[] = [];
  const delivered = condition();
  let hold: Promise<void> | undefined;
  /** Holds the first job; opened at the end even when a test failed, or stop would wait on it. */
  const held = gate();
  let url = "";
  /** What the bridge told of jobs: queue names, and null after a reconnect. */
  const told: (string | null)[] = [];

  before(async () => {
    url = await (await startPostgres()).createDatabase();
    store = await openStore({ databaseUrl: url, dataDir: os.tmpdir() });
    const common = { connectionString: url, bound: 10_000, logger, queueName: "announced" };
    const jobsChannel = "test_announced_jobs";
    api = await createPgQueue({ ...common, concurrency: 0, jobsChannel });
    worker = await createPgQueue({ ...common, concurrency: 4, pollMs: 600_000, jobsChannel });
    bridge = await createPgNotifyBridge({
      connectionString: url,
      events: createRunEvents({ clock: systemClock }),
      logger,
      channel: "test_announced",
      jobsChannel,
    });
    bridge.onJobs((queueName) => worker.heard(queueName));
    bridge.onJobs((queueName) => {
      told.push(queueName);
      delivered.changed();
    });
    await worker.start(async (job) => {
      seen.push(job);
      delivered.changed();
      if (seen.length === 1 && hold) await hold;
    });
  });
  after(async () => {
    held.open();
    await Promise.all([api.stop(), worker.stop(), bridge.close()]);
    await store.close();
  });

  const submit = async () => {
    const run = newRun({ elementType: "DPL", scope: { app: "a", space: "s" } });
    await api.submit(run, { runId: run.id, kind: "flow", scope: run.scope }, store);
    return run.id;
  };
  const reached = (runId: string) =>
    delivered.until(() => seen.some((j) => j.runId === runId), `job ${runId} delivered`);

  it("a run submitted on an API node starts on an idle worker without waiting for its poll", async () => {
    hold = held.promise;
    const first = await submit();
    await reached(first);
    // The first job still runs: the lane is busy, and a new job reaches it all the same.
    const second = await submit();
    await reached(second);
    held.open();
  });

  it("a job sent alone (recovery, a freed slot) is announced too", async () => {
    const run = newRun({ elementType: "DPL", scope: { app: "a", space: "s" } });
    await store.insertRun(run);
    await api.enqueue({ runId: run.id, kind: "flow" });
    await reached(run.id);
  });

  it("a burst of submits runs each job once, an announcement of another queue among them", async () => {
    worker.heard("some-other-queue-flow");
    const ids = await Promise.all([submit(), submit(), submit()]);
    for (const id of ids) await reached(id);
    assert.equal(new Set(seen.map((j) => j.runId)).size, seen.length);
  });

  it("a job nobody announced is found by the poll", async () => {
    // A second worker lane polling every 300 ms, told of nothing: its channel has no listener.
    const got: string[] = [];
    const found = condition();
    const quiet = { connectionString: url, bound: 10_000, logger, queueName: "unannounced" };
    const sender = await createPgQueue({ ...quiet, concurrency: 0, jobsChannel: "nobody_listens" });
    let polling = false;
    const clock: Clock = {
      ...systemClock,
      setTimeout(fn, ms) {
        polling ||= ms > 100 && ms <= 300; // not the recount (500 ms)
        found.changed();
        return systemClock.setTimeout(fn, ms);
      },
    };
    const poller = await createPgQueue({
      ...quiet,
      concurrency: 2,
      pollMs: 300,
      jobsChannel: "nobody_listens",
      clock,
    });
    try {
      await poller.start(async (job) => {
        got.push(job.runId);
        found.changed();
      });
      // Its first fetch is over once it waits for its poll: the job below is the poll's to find.
      await found.until(() => polling, "the lane waiting for its poll");
      const run = newRun({ elementType: "DPL", scope: { app: "a", space: "s" } });
      await sender.submit(run, { runId: run.id, kind: "flow", scope: run.scope }, store);
      await found.until(() => got.includes(run.id), "the unannounced job fetched by the poll");
    } finally {
      await Promise.all([sender.stop(), poller.stop()]);
    }
  });

  it("a node's bridge does not pass on the node's own announcements", async () => {
    const own = await createPgQueue({
      connectionString: url,
      bound: 10_000,
      logger,
      queueName: "announced-own",
      concurrency: 0,
      jobsChannel: "test_announced_jobs",
      announceAs: bridge.nodeId,
    });
    try {
      const before = told.length;
      const mine = newRun({ elementType: "DPL", scope: { app: "a", space: "s" } });
      await own.submit(mine, { runId: mine.id, kind: "flow", scope: mine.scope }, store);
      // Another node's, committed after it: a listener gets notifications in commit order.
      await reached(await submit());
      await delivered.until(
        () => told.slice(before).includes("announced-flow"),
        "the other node's announcement",
      );
      assert.deepEqual(told.slice(before), ["announced-flow"], "only the other node's");
    } finally {
      await own.stop();
    }
  });

  it("a combined node (its own announcements ignored) starts a run submitted on it at once", async () => {
    const ran: string[] = [];
    const combined = await createPgQueue({
      connectionString: url,
      bound: 10_000,
      logger,
      queueName: "announced-combined",
      concurrency: 2,
      pollMs: 600_000,
      jobsChannel: "test_announced_jobs",
      announceAs: bridge.nodeId,
    });
    bridge.onJobs((queueName) => combined.heard(queueName));
    const local = async () => {
      const run = newRun({ elementType: "DPL", scope: { app: "a", space: "s" } });
      await combined.submit(run, { runId: run.id, kind: "flow", scope: run.scope }, store);
      await delivered.until(() => ran.includes(run.id), `local job ${run.id} started`);
    };
    try {
      await combined.start(async (job) => {
        ran.push(job.runId);
        delivered.changed();
      });
      // The second is submitted after the lane's first fetch brought the first: only the
      // submit's own tell can reach it before the ten-minute poll.
      await local();
      await local();
    } finally {
      await combined.stop();
    }
  });

  it("after its listener reconnects, the lanes are told to look, and announcements reach them again", async () => {
    const ended = await terminateBackends(
      url,
      "application_name = 'sluice-run-events' AND query LIKE 'LISTEN%'",
    );
    assert.equal(ended, 1, "the bridge's listening connection");
    await delivered.until(() => told.includes(null), "told of a reconnect");
    const id = await submit();
    await reached(id);
  });

  it("an announcement heard after stop arms no timer", async () => {
    // Counts the timers the queue has armed, so that one armed after stop shows.
    const pending = new Set<TimerHandle>();
    const clock: Clock = {
      now: () => 0,
      setTimeout(fn, ms) {
        const h = setTimeout(() => {
          pending.delete(h);
          fn();
        }, ms);
        pending.add(h);
        return h;
      },
      clearTimeout(h) {
        pending.delete(h);
        clearTimeout(h as ReturnType<typeof setTimeout>);
      },
    };
    const q = await createPgQueue({
      connectionString: url,
      bound: 10_000,
      logger,
      queueName: "announced-stop",
      concurrency: 1,
      pollMs: 600_000,
      clock,
    });
    await q.start(async () => {});
    await q.stop();
    // The bridge closes after the queue (src/services.ts): announcements still arrive meanwhile.
    q.heard("announced-stop-flow");
    q.heard(null);
    assert.equal(pending.size, 0, "a timer was left armed by a stopped queue");
  });
});
