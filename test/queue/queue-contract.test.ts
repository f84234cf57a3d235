import assert from "node:assert/strict";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { after, before, describe, it } from "node:test";
import { sql } from "kysely";
import { PgBoss } from "pg-boss";
import pino from "pino";
import { systemClock } from "../../src/clock.ts";
import { SluiceError } from "../../src/errors.ts";
import { createLocalQueue } from "../../src/queue/local-queue.ts";
import { createPgQueue } from "../../src/queue/pg-queue.ts";
import type { RunJob, RunQueue } from "../../src/queue/types.ts";
import { createRecovery } from "../../src/runs/recovery.ts";
import { createRunEvents } from "../../src/runs/run-events.ts";
import { type OpenedStore, openStore } from "../../src/store/open-store.ts";
import { isUniqueViolation } from "../../src/store/unique-violation.ts";
import { startPostgres } from "../helpers/pg.ts";
import { newRun } from "../helpers/runs.ts";
import { condition, gate } from "../helpers/wait.ts";

/**
 * One contract for both queue backends (src/queue/types.ts; docs/cluster.md, "Nothing accepted is
 * lost"): the same cases run against the in-memory queue and the pg-boss one. A submitted run
 * reaches the handler with its record in the store, once; a stopping queue refuses before
 * writing; the bound answers 429 except for re-queued runs; a throwing handler stalls nothing;
 * each kind keeps to its own concurrency; jobs sent before `start` wait for it; `stop` waits for
 * the jobs running. Each case awaits the deliveries it expects, never a fixed time.
 */

const quiet = { warn: () => {}, error: () => {} };

/** Resolves with the first job the queue delivers for `runId`. */
function delivered(seen: Map<string, () => void>, runId: string): Promise<void> {
  return new Promise((resolve) => seen.set(runId, resolve));
}

/** How a case sizes its queue: the bound, and the slots of each kind. */
interface Sizing {
  bound?: number;
  concurrency?: Record<RunJob["kind"], number>;
}

const backends = {
  local: async () => ({
    store: await openStore({ dataDir: fs.mkdtempSync(path.join(os.tmpdir(), "sluice-q-")) }),
    queue: (s: Sizing = {}): Promise<RunQueue> =>
      Promise.resolve(
        createLocalQueue({
          bound: s.bound ?? 100,
          concurrency: s.concurrency ?? { flow: 2, script: 2 },
        }),
      ),
  }),
  pg: async () => {
    const url = await (await startPostgres()).createDatabase();
    let n = 0;
    return {
      store: await openStore({ databaseUrl: url, dataDir: os.tmpdir() }),
      url,
      queue: (s: Sizing = {}) =>
        createPgQueue({
          connectionString: url,
          bound: s.bound ?? 100,
          concurrency: s.concurrency ?? { flow: 2, script: 2 },
          logger: quiet,
          queueName: `c${++n}`,
          poolSize: 2,
        }),
    };
  },
};

const isTooMany = (err: unknown) => err instanceof SluiceError && err.code === 429;

for (const [name, make] of Object.entries(backends)) {
  describe(`run queue contract (${name})`, () => {
    let store: OpenedStore;
    let queue: (s?: Sizing) => Promise<RunQueue>;
    const open: RunQueue[] = [];
    before(async () => {
      const made = await make();
      store = made.store;
      queue = async (s) => {
        const q = await made.queue(s);
        open.push(q);
        return q;
      };
    });
    after(async () => {
      // Stopping twice is allowed: cases that stop their queue themselves are stopped again here.
      await Promise.all(open.map((q) => q.stop()));
      await store.close();
    });

    it("a submitted run is in the store and its job reaches the handler", async () => {
      const q = await queue();
      const seen = new Map<string, () => void>();
      await q.start(async (job) => {
        const r = await store.getRun(null, job.runId);
        assert.equal(r?.status, "QUEUED", "the run was committed before its job was delivered");
        seen.get(job.runId)?.();
      });
      const run = newRun();
      const got = delivered(seen, run.id);
      await q.submit(run, { runId: run.id, kind: "script" }, store);
      await got;
      await q.stop();
    });

    it("200 concurrent submits are each stored and delivered exactly once", async () => {
      const q = await queue();
      const seen = new Map<string, number>();
      const runs = Array.from({ length: 200 }, () => newRun({ elementType: "DPL" }));
      let left = runs.length;
      let all: () => void = () => {};
      const delivered = new Promise<void>((r) => {
        all = r;
      });
      await q.start(async (job) => {
        seen.set(job.runId, (seen.get(job.runId) ?? 0) + 1);
        if (--left === 0) all();
      });
      await Promise.all(runs.map((r) => q.submit(r, { runId: r.id, kind: "flow" }, store)));
      await delivered;
      for (const r of runs) {
        assert.equal(seen.get(r.id), 1, r.id);
        assert.equal((await store.getRun(null, r.id))?.id, r.id);
      }
      await q.stop();
    });

    it("a submit whose run ID is taken fails alone: the submits committed with it are accepted", async () => {
      // A custom error handler's run ID is derived (docs/error-handlers.md, "Durable"): a second
      // sender's submit of it meets a taken key, and the other tenants' submits committed in the
      // same group must not fail with it (docs/cluster.md, "Group commit").
      const q = await queue();
      const seen = new Map<string, () => void>();
      await q.start(async (job) => seen.get(job.runId)?.());
      const first = newRun();
      const firstRan = delivered(seen, first.id);
      await q.submit(first, { runId: first.id, kind: "flow" }, store);
      await firstRan;
      const other = newRun({ scope: { app: "app2", space: "space2" } });
      const otherRan = delivered(seen, other.id);
      // Another sender's record of the taken ID: made elsewhere, a moment later.
      const again = { ...first, createTime: first.createTime + 1, nodeId: "elsewhere" };
      const [o, a] = await Promise.allSettled([
        q.submit(other, { runId: other.id, kind: "flow" }, store),
        q.submit(again, { runId: again.id, kind: "flow" }, store),
      ]);
      assert.equal(
        o.status,
        "fulfilled",
        `the other submit is accepted: ${o.status === "rejected" ? String(o.reason) : ""}`,
      );
      assert.equal(a.status, "rejected");
      assert.ok(
        a.status === "rejected" && isUniqueViolation(a.reason),
        `refused as a taken key: ${a.status === "rejected" ? String(a.reason) : ""}`,
      );
      await otherRan;
      assert.equal((await store.getRun(null, other.id))?.id, other.id);
      assert.equal((await store.getRun(null, first.id))?.createTime, first.createTime);
      await q.stop();
    });

    it("a stopping queue refuses with 429 before anything is written", async () => {
      const q = await queue();
      await q.stop();
      const run = newRun();
      await assert.rejects(
        q.submit(run, { runId: run.id, kind: "script" }, store),
        (err: unknown) => err instanceof SluiceError && err.code === 429,
      );
      assert.equal(await store.getRun(null, run.id), undefined);
    });

    it("answers 429 once it holds `bound` jobs, still takes re-queued ones, and counts them all", async () => {
      const q = await queue({ bound: 3 });
      for (const id of ["b1", "b2", "b3"]) await q.enqueue({ runId: id, kind: "flow" });
      assert.equal(q.depth(), 3);
      await assert.rejects(q.enqueue({ runId: "b-over", kind: "flow" }), isTooMany);
      assert.equal(q.depth(), 3, "a refused job is not counted");
      // Runs accepted before a restart are queued again whatever the bound.
      await q.enqueue({ runId: "b-requeued", kind: "flow" }, { ignoreBound: true });
      assert.equal(q.depth(), 4);
      const seen: string[] = [];
      const progress = condition();
      await q.start(async (job) => {
        seen.push(job.runId);
        progress.changed();
      });
      await progress.until(() => seen.length === 4, "the four accepted jobs ran");
      await q.stop();
      assert.deepEqual(seen.toSorted(), ["b-requeued", "b1", "b2", "b3"]);
      assert.equal(q.depth(), 0);
    });

    it("a handler that throws does not stall its lane: the jobs behind it run", async () => {
      const q = await queue({ concurrency: { flow: 1, script: 1 } });
      const calls: string[] = [];
      const progress = condition();
      await q.start(async (job) => {
        calls.push(job.runId);
        progress.changed();
        if (job.runId.startsWith("bad")) throw new Error("boom");
      });
      for (const id of ["bad1", "bad2", "good"]) await q.enqueue({ runId: id, kind: "flow" });
      await progress.until(() => calls.includes("good"), "the job behind two throwing ones ran");
      await q.stop();
      assert.deepEqual(calls.toSorted(), ["bad1", "bad2", "good"], "each delivered once");
    });

    it("each kind keeps to its own slots, and one kind's held jobs do not hold the other", async () => {
      const q = await queue({ concurrency: { flow: 2, script: 1 } });
      const running = { flow: 0, script: 0 };
      const peak = { flow: 0, script: 0 };
      const finished = { flow: 0, script: 0 };
      const scripts = gate();
      const progress = condition();
      // Flows are held until both flow slots are busy at once while a script holds its slot.
      const flowsFull = progress.until(
        () => running.flow === 2 && running.script === 1,
        "two flows and a script running at once",
      );
      for (let i = 0; i < 3; i++) await q.enqueue({ runId: `ks-${i}`, kind: "script" });
      for (let i = 0; i < 6; i++) await q.enqueue({ runId: `kf-${i}`, kind: "flow" });
      await q.start(async (job) => {
        running[job.kind]++;
        peak[job.kind] = Math.max(peak[job.kind], running[job.kind]);
        progress.changed();
        await (job.kind === "script" ? scripts.promise : flowsFull);
        running[job.kind]--;
        finished[job.kind]++;
        progress.changed();
      });
      try {
        await progress.until(() => finished.flow === 6, "every flow ran beside a held script");
        assert.deepEqual(running, { flow: 0, script: 1 });
      } finally {
        scripts.open();
      }
      await progress.until(() => finished.script === 3, "the scripts ran once released");
      assert.deepEqual(peak, { flow: 2, script: 1 });
    });

    it("jobs sent before `start` wait for it, and `stop` waits for the jobs running", async () => {
      const q = await queue({ concurrency: { flow: 2, script: 2 } });
      const runs = [newRun(), newRun(), newRun()];
      for (const r of runs) await q.submit(r, { runId: r.id, kind: "flow" }, store);
      let running = 0;
      let finished = 0;
      const held = gate();
      const progress = condition();
      await q.start(async () => {
        running++;
        progress.changed();
        await held.promise;
        finished++;
      });
      await progress
        .until(() => running === 2, "both slots took a job sent before the start")
        .catch((err: unknown) => {
          held.open();
          throw err;
        });
      // Both jobs are still held when stop is called: it resolves only once they have completed.
      const stopped = q.stop();
      held.open();
      await stopped;
      assert.equal(finished, running, "every job running when stop was called completed first");
      assert.ok(finished >= 2 && finished <= 3);
    });
  });
}

describe("cluster queue: the run and its job commit together", () => {
  let store: OpenedStore;
  let url: string;
  let queue: () => Promise<RunQueue>;
  const open: RunQueue[] = [];
  before(async () => {
    const made = await backends.pg();
    ({ store, url } = made);
    queue = async () => {
      const q = await made.queue();
      open.push(q);
      return q;
    };
  });
  after(async () => {
    await Promise.all(open.map((q) => q.stop()));
    await store.close();
  });

  it("when the job's send fails, the run is not accepted and nothing is stored", async () => {
    const q = await queue();
    const run = newRun();
    // The store's transaction refuses pg-boss's insert, as a database error in the send would.
    const failing: Pick<OpenedStore, "insertRun" | "insertRunsWith"> = {
      insertRun: (r) => store.insertRun(r),
      insertRunsWith: (r, also) =>
        store.insertRunsWith(r, (tx) =>
          also({
            executeSql: async (text, values) => {
              if (/pgboss/i.test(text)) throw new Error("send failed");
              return tx.executeSql(text, values);
            },
          }),
        ),
    };
    await assert.rejects(q.submit(run, { runId: run.id, kind: "script" }, failing), /send failed/);
    assert.equal(await store.getRun(null, run.id), undefined, "the run rolled back with its job");
  });

  it("recovery queues again a QUEUED run whose job is gone and one whose claim a dead worker holds", async () => {
    const q = await queue();
    const seen = new Map<string, () => void>();
    const events = createRunEvents({ clock: systemClock });
    const recovery = createRecovery({
      store,
      queue: q,
      events,
      clock: systemClock,
      logger: pino({ level: "silent" }),
      nodeId: "sweeper",
      sharedDatabase: true,
      heartbeatMs: 100,
      heartbeatTimeoutMs: 300,
      requeue: false,
    });
    // From before the job was sent with the run: a row and no job.
    const orphan = newRun({ createTime: Date.now() - 60_000 });
    await store.insertRun(orphan);
    // Claimed by a worker that then died before starting it.
    const claimed = newRun({ createTime: Date.now() - 60_000 });
    await q.submit(claimed, { runId: claimed.id, kind: "script" }, store);
    const dead = new PgBoss({ connectionString: url, max: 1, schedule: false, supervise: false });
    dead.on("error", () => {});
    await dead.start();
    const jobs = await dead.fetch<RunJob>(await queueNameOf(store, claimed.id));
    assert.deepEqual(
      jobs.map((j) => j.data.runId),
      [claimed.id],
    );
    await dead.stop({ graceful: false, close: true });

    const got = [delivered(seen, orphan.id), delivered(seen, claimed.id)];
    await q.start(async (job) => seen.get(job.runId)?.());
    // The claim is fresh: only the orphan comes back now.
    assert.deepEqual(await recovery.sweep(), { failed: 0, requeued: 1 });
    await got[0];
    // Once the claim is older than the heartbeat timeout, the beat's sweep gives it back too.
    recovery.start();
    await got[1];
    await recovery.stop();
  });
});

/** The pg-boss queue holding this run's job (the queue's names are its own business). */
async function queueNameOf(store: OpenedStore, runId: string): Promise<string> {
  const { rows } = await sql<{ name: string }>`
    select name from pgboss.job where data->>'runId' = ${runId}`.execute(store.db);
  const name = rows[0]?.name;
  assert.ok(name, "the run's job exists");
  return name;
}
