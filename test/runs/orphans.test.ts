import assert from "node:assert/strict";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { after, before, describe, it } from "node:test";
import { pino } from "pino";
import { loadConfig } from "../../src/config.ts";
import { ErrorCode } from "../../src/errors.ts";
import { createLocalQueue } from "../../src/queue/local-queue.ts";
import { createRunLifecycle, type RunExecutor, type RunRequest } from "../../src/runs/lifecycle.ts";
import { createOrphanSweep, createRunsHere, type RunsHere } from "../../src/runs/orphans.ts";
import { createQueuedShare } from "../../src/runs/queued-share.ts";
import { createRunEvents, type RunEvents } from "../../src/runs/run-events.ts";
import { UNBOUNDED_RUN_MEMORY } from "../../src/runs/run-memory.ts";
import { openStore } from "../../src/store/open-store.ts";
import type { Store } from "../../src/store/types.ts";
import { newRun } from "../helpers/runs.ts";
import { gate, within } from "../helpers/wait.ts";
import { createFakeClock, type FakeClock } from "../scheduler/fake-clock.ts";

/**
 * docs/cluster.md, "Runs STARTED here that nothing executes": a run recorded STARTED by this node
 * whose execution is not in this process (its insert's answer was lost after the commit, its
 * end's write failed) is ended FAILURE by the node's own sweep; a run executing here, or whose
 * insert is being committed right now, is never touched.
 */

const EVERY_MS = 1000;

describe("runs STARTED by this node that it does not execute", () => {
  let dataDir: string;
  let opened: Store;
  const release = gate();
  let nodes = 0;

  before(async () => {
    dataDir = fs.mkdtempSync(path.join(os.tmpdir(), "sluice-orphans-"));
    opened = await openStore({ dataDir });
  });
  after(async () => {
    release.open();
    await opened.close();
    fs.rmSync(dataDir, { recursive: true, force: true });
  });

  /**
   * A node (its own ID: the tests share one store) whose runs execute until `release` opens or
   * their signal stops them. `hooks` stand in for the store's answers: what an insert or an end
   * does instead of committing at once.
   */
  function nodeOn(batch?: number) {
    const nodeId = `node-${++nodes}`;
    const clock: FakeClock = createFakeClock();
    const events: RunEvents = createRunEvents({ clock });
    const here: RunsHere = createRunsHere();
    const hooks: {
      insert?: ((id: string, commit: () => Promise<void>) => Promise<void>) | undefined;
      end?: ((id: string) => Promise<void>) | undefined;
    } = {};
    const store: Store = {
      ...opened,
      insertRun: (run, end) =>
        hooks.insert
          ? hooks.insert(run.id, () => opened.insertRun(run, end))
          : opened.insertRun(run, end),
      endRun: async (id, end) => {
        await hooks.end?.(id);
        return opened.endRun(id, end);
      },
    };
    const logListeners: ((line: string) => void)[] = [];
    const logger = pino(
      { level: "warn" },
      {
        write: (line: string) => {
          for (const l of logListeners) l(line);
        },
      },
    );
    const stopped = new Set<string>();
    const executor: RunExecutor<RunRequest> = {
      kind: "script",
      prepare: async (_req, status) =>
        newRun({ status, nodeId, startTime: clock.now(), createTime: clock.now() }),
      execute: (rec, _p, signal) =>
        new Promise((resolve) => {
          signal.addEventListener("abort", () => {
            stopped.add(rec.id);
            resolve({ outcome: { status: "CANCELED", error: "stopped" } });
          });
          void release.promise.then(() => resolve({ outcome: { status: "SUCCESS", value: 1 } }));
        }),
    };
    const queue = createLocalQueue({ bound: 100, concurrency: { flow: 1, script: 1 } });
    const lifecycle = createRunLifecycle(
      {
        store,
        events,
        clock,
        logger,
        nodeId,
        limits: { maxRunS: 3600, maxWaitS: 5, resultBytes: 1 << 20 },
        queue: { reserve: () => null },
        memory: UNBOUNDED_RUN_MEMORY,
        queued: createQueuedShare({
          store,
          clock,
          limits: { queuedRuns: 100, queuedRunsPerApp: 100, queuedRunsReserve: 0 },
        }),
        commitQueued: (run, job) => queue.submit(run, job, store),
        queueIsLocal: true,
        here,
        notFound: ErrorCode.TASK_NOT_FOUND,
      },
      executor,
    );
    const sweep = createOrphanSweep({
      store,
      events,
      clock,
      logger,
      nodeId,
      here,
      everyMs: EVERY_MS,
      ...(batch === undefined ? {} : { batch }),
    });
    /** The run's end once published (the events' own timers are the fake clock's). */
    const endOf = (runId: string) =>
      within(
        new Promise<void>((resolve) =>
          events.subscribe((e) => {
            if (e.type === "ended" && e.runId === runId) resolve();
          }),
        ),
        5000,
        `the end of ${runId} is published`,
      );
    const logged = (re: RegExp) =>
      within(
        new Promise<void>((resolve) => logListeners.push((l) => re.test(l) && resolve())),
        5000,
        `a log line ${re}`,
      );
    return { nodeId, clock, events, here, hooks, lifecycle, sweep, stopped, endOf, logged };
  }

  it("fails an orphan once it is older than the grace; the run executing here and other nodes' runs are untouched", async () => {
    const { nodeId, clock, lifecycle, sweep, stopped, endOf } = nodeOn();
    const executing = await lifecycle.start({ parameter: null }, { inProcess: true });
    // As a lost commit leaves it: STARTED by this node, executed by nobody.
    const now = clock.now();
    const orphan = newRun({ status: "STARTED", nodeId, startTime: now, createTime: now });
    await opened.insertRun(orphan);
    const elsewhere = newRun({ status: "STARTED", nodeId: "another-node", startTime: now - 1e6 });
    await opened.insertRun(elsewhere);

    // Younger than the grace (it may be a start being committed right now): left alone.
    assert.equal(await sweep.sweep(), 0);
    assert.equal((await opened.getRun(null, orphan.id))?.status, "STARTED");

    clock.advance(EVERY_MS);
    const ended = endOf(orphan.id);
    assert.equal(await sweep.sweep(), 1);
    await ended;
    const failed = await opened.getRun(null, orphan.id);
    assert.equal(failed?.status, "FAILURE");
    assert.match(failed?.error ?? "", new RegExp(`node ${nodeId} is not executing this run`));
    assert.equal(failed?.summary, failed?.error);
    assert.equal(failed?.endTime, clock.now());
    // The run executing here is untouched, and so is another node's (the heartbeat rule's).
    assert.equal((await opened.getRun(null, executing))?.status, "STARTED");
    assert.equal(stopped.has(executing), false);
    assert.equal((await opened.getRun(null, elsewhere.id))?.status, "STARTED");
    assert.equal(await sweep.sweep(), 0, "a second sweep finds nothing more");
  });

  it("sweeps on the clock: a start whose commit answer was lost is failed, not stranded", async () => {
    const { nodeId, clock, hooks, here, lifecycle, sweep, endOf } = nodeOn();
    // The server committed the insert; its answer never came.
    let lost = "";
    hooks.insert = async (id, commit) => {
      await commit();
      lost = id;
      throw new Error("Connection terminated unexpectedly");
    };
    await assert.rejects(
      lifecycle.start({ parameter: null }, { inProcess: true }),
      /Connection terminated/,
    );
    hooks.insert = undefined;
    const row = await opened.getRun(null, lost);
    assert.equal(row?.status, "STARTED");
    assert.equal(row?.nodeId, nodeId);
    assert.equal(here.has(lost), false);
    sweep.start();
    try {
      const ended = endOf(lost);
      clock.advance(EVERY_MS);
      await ended;
      assert.equal((await opened.getRun(null, lost))?.status, "FAILURE");
    } finally {
      await sweep.stop();
    }
  });

  it("leaves a run whose insert is being committed, and one whose own end is being recorded", async () => {
    const { clock, events, hooks, lifecycle, sweep, endOf } = nodeOn();
    // The insert is committed but its answer is held back: the row is STARTED, the start pends.
    const committed = gate();
    const answer = gate();
    let id = "";
    hooks.insert = async (runId, commit) => {
      await commit();
      id = runId;
      committed.open();
      await answer.promise;
    };
    const starting = lifecycle.start({ parameter: null }, { inProcess: true });
    await committed.promise;
    hooks.insert = undefined;
    clock.advance(EVERY_MS * 5);
    assert.equal(await sweep.sweep(), 0, "a start being committed is not an orphan");
    answer.open();
    assert.equal(await starting, id);

    // The execution is over and its end is being written: the sweep meanwhile leaves it.
    let swept = -1;
    hooks.end = async (runId) => {
      if (runId !== id) return;
      hooks.end = undefined;
      clock.advance(EVERY_MS * 5);
      swept = await sweep.sweep();
    };
    const ended = endOf(id);
    // A terminate heard from another node stops it; its own end is recorded here.
    events.notify(id);
    await ended;
    assert.equal(swept, 0);
    const run = await opened.getRun(null, id);
    assert.equal(run?.status, "CANCELED");
    assert.equal(run?.error, "stopped");
  });

  it("fails a run whose end could not be recorded (the store failed): it is not left STARTED", async () => {
    const { clock, events, hooks, lifecycle, sweep, logged } = nodeOn();
    const id = await lifecycle.start({ parameter: null }, { inProcess: true });
    hooks.end = async (runId) => {
      if (runId !== id) return;
      hooks.end = undefined;
      throw new Error("disk I/O error");
    };
    const failedWrite = logged(/could not record a run's end/);
    events.notify(id);
    await failedWrite;
    assert.equal((await opened.getRun(null, id))?.status, "STARTED");
    clock.advance(EVERY_MS);
    assert.equal(await sweep.sweep(), 1);
    const run = await opened.getRun(null, id);
    assert.equal(run?.status, "FAILURE");
    assert.match(run?.error ?? "", /is not executing this run/);
  });
  it("finds an orphan behind more runs executing here than one read takes (a page of 2 here, 500 in service)", async () => {
    const { nodeId, clock, here, sweep, endOf } = nodeOn(2);
    // Three long runs executing here, older than the orphan: held, each a row STARTED by this node.
    const t = clock.now() - 10 * EVERY_MS;
    const releases: (() => void)[] = [];
    for (let i = 0; i < 3; i++) {
      const held = newRun({ status: "STARTED", nodeId, startTime: t, createTime: t + i });
      await opened.insertRun(held);
      releases.push(here.hold(held.id));
    }
    const orphan = newRun({ status: "STARTED", nodeId, startTime: t + 5, createTime: t + 5 });
    await opened.insertRun(orphan);
    const ended = endOf(orphan.id);
    assert.equal(await sweep.sweep(), 1, "the orphan behind the held runs is ended");
    await ended;
    assert.equal((await opened.getRun(null, orphan.id))?.status, "FAILURE");
    for (const r of releases) r();
  });
});

describe("ORPHAN_SWEEP_MS (README, configuration)", () => {
  it("defaults to a minute; takes whole milliseconds, 10 or more; anything else stops the start", () => {
    assert.equal(loadConfig({}).orphanSweepMs, 60_000);
    assert.equal(loadConfig({ ORPHAN_SWEEP_MS: "200" }).orphanSweepMs, 200);
    for (const bad of ["0", "9", "-5", "1.5", "soon"])
      assert.throws(() => loadConfig({ ORPHAN_SWEEP_MS: bad }), /ORPHAN_SWEEP_MS/);
  });
});
