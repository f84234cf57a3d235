import os from "node:os";
import { after, before, describe, it } from "node:test";
import type { Clock } from "../../src/clock.ts";
import { createPgQueue, type PgRunQueue } from "../../src/queue/pg-queue.ts";
import type { RunJob } from "../../src/queue/types.ts";
import { type OpenedStore, openStore } from "../../src/store/open-store.ts";
import { startPostgres } from "../helpers/pg.ts";
import { newRun } from "../helpers/runs.ts";
import { condition } from "../helpers/wait.ts";

const logger = { info: () => {}, warn: () => {}, error: () => {} };
const HOUR = 3_600_000;

/** The system's timers, and a wall clock the test steps back (NTP, a resumed VM). */
function steppingClock() {
  let offset = 0;
  const armed = condition();
  const waits: number[] = [];
  const clock: Clock = {
    now: () => Date.now() + offset,
    setTimeout(fn, ms) {
      waits.push(ms);
      armed.changed();
      return setTimeout(fn, ms);
    },
    clearTimeout: (h) => clearTimeout(h as ReturnType<typeof setTimeout>),
  };
  return { clock, armed, waits, stepBack: (ms: number) => (offset -= ms) };
}

/**
 * A lane's waits count from its last fetch on the wall clock; a step back of that clock must not
 * stall it (docs/cluster.md, "Waking the lanes": told, it fetches within 50 ms; untold, within
 * `pollMs` of its last fetch).
 */
describe("cluster lanes when the wall clock steps back", () => {
  let url = "";
  let store: OpenedStore;
  before(async () => {
    url = await (await startPostgres()).createDatabase();
    store = await openStore({ databaseUrl: url, dataDir: os.tmpdir() });
  });
  after(async () => {
    await store.close();
  });

  const job = () => {
    const run = newRun({ elementType: "DPL", scope: { app: "a", space: "s" } });
    return { run, job: { runId: run.id, kind: "flow" as const, scope: run.scope } };
  };
  const submit = async (q: PgRunQueue) => {
    const j = job();
    await q.submit(j.run, j.job, store);
    return j.run.id;
  };

  it("a lane told of a job fetches it, though its last fetch seems an hour ahead", async () => {
    const { clock, stepBack } = steppingClock();
    const seen: RunJob[] = [];
    const delivered = condition();
    const worker = await createPgQueue({
      connectionString: url,
      bound: 10_000,
      logger,
      queueName: "clock-told",
      concurrency: 4,
      pollMs: 600_000,
      clock,
    });
    try {
      // Two jobs queued before it starts: its first fetch brings more than one (no "trickle").
      const first = [await submit(worker), await submit(worker)];
      await worker.start(async (j) => {
        seen.push(j);
        delivered.changed();
      });
      await delivered.until(() => first.every((id) => seen.some((j) => j.runId === id)), "first");
      stepBack(HOUR);
      // A submit on this node tells its lane, as an announcement from another would.
      const late = await submit(worker);
      await delivered.until(() => seen.some((j) => j.runId === late), "the told job delivered");
    } finally {
      await worker.stop();
    }
  });

  it("the poll still finds an unannounced job after the step", async () => {
    const { clock, armed, waits, stepBack } = steppingClock();
    const seen: string[] = [];
    const delivered = condition();
    const common = { connectionString: url, bound: 10_000, logger, queueName: "clock-poll" };
    const sender = await createPgQueue({ ...common, concurrency: 0, jobsChannel: "nobody" });
    const poller = await createPgQueue({ ...common, concurrency: 2, pollMs: 300, clock });
    try {
      await poller.start(async (j) => {
        seen.push(j.runId);
        delivered.changed();
      });
      // Its first fetch is over once it sleeps until its poll (at most 300 ms; the recount waits
      // 500): the job below is the poll's.
      await armed.until(
        () => waits.some((ms) => ms > 100 && ms <= 300),
        "the lane waiting for its poll",
      );
      stepBack(HOUR);
      const id = await submit(sender);
      await delivered.until(() => seen.includes(id), "the unannounced job polled");
    } finally {
      await Promise.all([sender.stop(), poller.stop()]);
    }
  });
});
