import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { createQueuedShare } from "../../src/runs/queued-share.ts";
import { createFakeClock } from "../scheduler/fake-clock.ts";

/** The store's QUEUED runs per app, as the test sets them, and how often they were read. */
function fakeStore(initial: Record<string, number> = {}) {
  const s = {
    queued: new Map(Object.entries(initial)),
    reads: 0,
    queuedRunsByApp: async () => {
      s.reads++;
      return new Map(s.queued);
    },
  };
  return s;
}

function share(
  store: ReturnType<typeof fakeStore>,
  queuedRuns: number,
  queuedRunsPerApp: number,
  queuedRunsReserve = 0,
) {
  const clock = createFakeClock();
  return {
    clock,
    share: createQueuedShare({
      store,
      clock,
      limits: { queuedRuns, queuedRunsPerApp, queuedRunsReserve },
    }),
  };
}

const refused = (p: Promise<void>, re: RegExp) =>
  assert.rejects(p, (err: Error & { code?: number }) => {
    assert.equal(err.code, 429);
    assert.match(err.message, re);
    return true;
  });

describe("the places for queued runs (docs/run-limits.md, Queued runs)", () => {
  it("reads the store once, then admits well under both limits without reading it", async () => {
    const store = fakeStore();
    const { share: s } = share(store, 20, 8);
    for (let i = 0; i < 4; i++) await s.admit("a");
    assert.equal(store.reads, 1, "read at the first admit only");
    // Another app has places of its own.
    for (let i = 0; i < 4; i++) await s.admit("b");
    assert.equal(store.reads, 1);
  });

  it("refuses an app at its own limit after reading the store again, then stands by that read", async () => {
    const store = fakeStore();
    const { share: s, clock } = share(store, 10, 4);
    for (let i = 0; i < 4; i++) await s.admit("a");
    store.queued.set("a", 4); // all four committed and still waiting
    const before = store.reads;
    await refused(
      s.admit("a"),
      /^too many requests: app a holds 4 queued runs \(LIMIT_QUEUED_RUNS_PER_APP\)$/,
    );
    assert.equal(store.reads, before + 1);
    // Nothing admitted since: the read stands for 250 ms.
    store.queued.set("a", 0);
    clock.advance(249);
    await refused(s.admit("a"), /LIMIT_QUEUED_RUNS_PER_APP/);
    assert.equal(store.reads, before + 1);
    clock.advance(1);
    await s.admit("a");
    assert.equal(store.reads, before + 2);
  });

  it("reads again at once when runs admitted since the last read fill the count", async () => {
    const store = fakeStore();
    const { share: s } = share(store, 10, 2);
    await s.admit("a");
    await s.admit("a");
    const before = store.reads;
    // Both started already (the store holds none QUEUED): the count here is too high.
    await s.admit("a");
    assert.equal(store.reads, before + 1);
  });

  it("starts from what the store holds: a full store refuses every app at once", async () => {
    const store = fakeStore({ a: 3, b: 3 });
    const { share: s, clock } = share(store, 6, 5);
    await refused(s.admit("c"), /^too many requests: queue holds 6 runs$/);
    // While full, the store is read at most every 250 ms.
    await refused(s.admit("c"), /queue holds 6 runs/);
    store.queued.set("a", 2);
    clock.advance(249);
    await refused(s.admit("c"), /queue holds 6 runs/);
    assert.equal(store.reads, 1);
    clock.advance(1);
    await s.admit("c");
    assert.equal(store.reads, 2);
  });

  it("many admits at the limit at once share one read of the store", async () => {
    const store = fakeStore();
    const { share: s } = share(store, 100, 10);
    for (let i = 0; i < 10; i++) await s.admit("a");
    store.queued.set("a", 10);
    const before = store.reads;
    const results = await Promise.allSettled(Array.from({ length: 5 }, () => s.admit("a")));
    assert.equal(results.filter((r) => r.status === "fulfilled").length, 0);
    assert.equal(store.reads, before + 1);
  });
});

describe("the places for queued runs, attacked (docs/run-limits.md, Queued runs)", () => {
  it("two nodes on one store: an app sending to both gets no more than its share", async () => {
    // Every admitted run is committed and stays QUEUED: the store counts both nodes' runs.
    const store = fakeStore();
    const commit = (s: ReturnType<typeof share>["share"]) => async (app: string) => {
      await s.admit(app);
      store.queued.set(app, (store.queued.get(app) ?? 0) + 1);
    };
    const one = commit(share(store, 100, 10).share);
    const two = commit(share(store, 100, 10).share);
    let accepted = 0;
    for (let i = 0; i < 40; i++) {
      const sent = await Promise.allSettled([(i % 2 === 0 ? one : two)("evil")]);
      if (sent[0]?.status === "fulfilled") accepted++;
    }
    assert.ok(accepted <= 11, `${accepted} runs of one app QUEUED, its share is 10`);
  });

  it("a steady stream of runs that start at once reads the store once per half of the room", async () => {
    const store = fakeStore();
    const { share: s } = share(store, 1000, 100);
    for (let i = 0; i < 1000; i++) await s.admit(`app${i % 3}`);
    // Nothing stays QUEUED: the total's room is read every 500 runs, each app's every 50 of its own.
    assert.ok(store.reads <= 21, `${store.reads} reads for 1,000 runs`);
  });

  it("an honest burst of exactly an app's share, committed as it goes, is admitted in full", async () => {
    const store = fakeStore({ other: 3 });
    const { share: s } = share(store, 20, 10);
    const admit = async () => {
      await s.admit("a");
      store.queued.set("a", (store.queued.get("a") ?? 0) + 1);
    };
    const results = await Promise.allSettled(Array.from({ length: 10 }, admit));
    assert.equal(results.filter((r) => r.status === "fulfilled").length, 10);
    await refused(admit(), /LIMIT_QUEUED_RUNS_PER_APP/);
  });

  it("an app refused at its share by the store's count reads the store at most every 250 ms, whatever other apps do", async () => {
    const store = fakeStore({ evil: 50 });
    const { share: s } = share(store, 1000, 50);
    await s.admit("honest");
    const before = store.reads;
    for (let i = 0; i < 20; i++) {
      // An honest app's run admitted, then the attacker's refused: each refusal must not read.
      await s.admit("honest");
      await refused(s.admit("evil"), /LIMIT_QUEUED_RUNS_PER_APP/);
    }
    assert.ok(store.reads - before <= 1, `${store.reads - before} reads for 20 refusals`);
  });

  it("keeps the last places for apps with few queued runs: two full shares leave a third app room", async () => {
    // 100 places, 50 per app, the last 20 for apps holding fewer than 2 (a tenth of the reserve).
    const store = fakeStore({ a: 40, b: 40 });
    const { share: s, clock } = share(store, 100, 50, 20);
    await refused(
      s.admit("a"),
      /^too many requests: queue holds 80 runs; its last 20 places are kept for apps with fewer than 2 queued runs \(LIMIT_QUEUED_RUNS_RESERVE\)$/,
    );
    await refused(s.admit("b"), /LIMIT_QUEUED_RUNS_RESERVE/);
    // A small app takes places of the reserve, up to the floor; so does every other small app.
    await s.admit("c");
    await s.admit("c");
    store.queued.set("c", 2); // both committed and waiting
    await refused(s.admit("c"), /LIMIT_QUEUED_RUNS_RESERVE/);
    await s.admit("d");
    // Below the reserve every app is admitted as before (once the read that refused is stale).
    store.queued.set("a", 10);
    store.queued.set("b", 10);
    clock.advance(250);
    await s.admit("a");
  });
});
