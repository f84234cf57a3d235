import assert from "node:assert/strict";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { after, describe, it } from "node:test";
import { createRetention, type PassResult } from "../../src/runs/retention.ts";
import { cutoffOf, ruleOf } from "../../src/runs/retention-rules.ts";
import type {
  ExpiredRuns,
  RetentionElement,
  RetentionStore,
} from "../../src/store/retention-store.ts";
import { within } from "../helpers/wait.ts";
import { createFakeClock } from "../scheduler/fake-clock.ts";

/**
 * The purger's core on a fake clock (docs/retention.md): which rule applies, batches of the
 * configured size with a turn of the event loop between them, a pass per period, stop between
 * batches. The store here is a table in memory: the SQL itself is tested over both dialects in
 * test/store/retention-store.test.ts and through the service in test/http/retention.test.ts.
 */

const DAY = 86_400_000;
const SCOPE = { app: "a", space: "s" };
const silent = { info() {}, error() {} };
const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), "sluice-retention-unit-"));
after(() => fs.rmSync(dataDir, { recursive: true, force: true }));

/** Runs as `{id, elementId, end}`; a batch takes the oldest `limit` that ended before the cutoff. */
function memoryStore(
  elements: RetentionElement[],
  runs: { id: string; el: string; end: number }[],
) {
  const batches: number[] = [];
  const store: RetentionStore = {
    elements: async () => elements,
    scriptSource: async () => ({
      kind: "module",
      content: Buffer.from("# sluice-retention-days: 1\ndef main(p): return p\n"),
    }),
    async purgeBatch(r: ExpiredRuns, limit: number) {
      const picked = runs
        .filter((x) => x.el === r.elementId && x.end < r.cutoff)
        .sort((a, b) => a.end - b.end)
        .slice(0, limit);
      for (const p of picked) runs.splice(runs.indexOf(p), 1);
      batches.push(picked.length);
      return picked.map((p) => p.id);
    },
    countExpired: async (r) => runs.filter((x) => x.el === r.elementId && x.end < r.cutoff).length,
  };
  return { store, batches, runs };
}

const element = (id: string, type: "DPL" | "PY", configure: unknown = {}): RetentionElement => ({
  elementId: id,
  scope: SCOPE,
  type,
  name: `e${id}`,
  folderPath: "/",
  updatedAt: 1,
  configureJson: type === "DPL" ? JSON.stringify(configure) : null,
});

describe("retention rules", () => {
  it("an element's own days win, 0 included; otherwise the global days; 0 keeps for good", () => {
    assert.deepEqual(ruleOf(30, { days: undefined, source: "configure" }), {
      days: 30,
      source: "global",
    });
    assert.deepEqual(ruleOf(30, { days: 0, source: "configure" }), {
      days: 0,
      source: "configure",
    });
    assert.deepEqual(ruleOf(0, { days: 5, source: "declaration" }), {
      days: 5,
      source: "declaration",
    });
    assert.equal(cutoffOf(10 * DAY, { days: 0, source: "global" }), null);
    assert.equal(cutoffOf(10 * DAY, { days: 3, source: "global" }), 7 * DAY);
  });
});

describe("the purger", () => {
  it("purges in batches of RUN_RETENTION_BATCH, letting the event loop turn between them", async () => {
    const clock = createFakeClock(100 * DAY);
    const runs = Array.from({ length: 25 }, (_, i) => ({ id: `r${i}`, el: "1", end: i }));
    runs.push({ id: "fresh", el: "1", end: 99 * DAY });
    const mem = memoryStore([element("1", "DPL")], runs);
    const retention = createRetention({
      store: mem.store,
      clock,
      logger: silent,
      config: { days: 30, batch: 10, sweepMs: 0, dataDir },
    });
    // A callback queued during one batch runs before the next batch is read: the purger yields
    // a turn of the event loop, not only a microtask.
    const original = mem.store.purgeBatch;
    let turned = false;
    const turnedBefore: boolean[] = [];
    mem.store.purgeBatch = async (r, limit) => {
      turnedBefore.push(turned);
      turned = false;
      setImmediate(() => {
        turned = true;
      });
      return original(r, limit);
    };
    const result = await retention.pass();
    assert.equal(result.runs, 25);
    assert.deepEqual(mem.batches, [10, 10, 5]);
    assert.deepEqual(turnedBefore, [false, true, true], "the event loop turned between batches");
    assert.deepEqual(
      mem.runs.map((r) => r.id),
      ["fresh"],
    );
  });

  it("an element that fails does not stop the pass: the others are purged and it is logged", async () => {
    const clock = createFakeClock(100 * DAY);
    const runs = [
      { id: "a", el: "1", end: 1 },
      { id: "b", el: "2", end: 1 },
    ];
    const mem = memoryStore([element("1", "DPL"), element("2", "DPL")], runs);
    const original = mem.store.purgeBatch;
    mem.store.purgeBatch = async (r, limit) => {
      if (r.elementId === "1") throw new Error("database refused the batch");
      return original(r, limit);
    };
    const errors: unknown[] = [];
    const retention = createRetention({
      store: mem.store,
      clock,
      logger: { info() {}, error: (obj: unknown) => errors.push(obj) },
      config: { days: 30, batch: 10, sweepMs: 0, dataDir },
    });
    const result = await retention.pass();
    assert.equal(result.runs, 1, "element 2's run went although element 1 failed");
    assert.deepEqual(
      mem.runs.map((r) => r.id),
      ["a"],
    );
    assert.equal(errors.length, 1);
  });

  it("takes each element's rule: configure, the script's declaration, the global default", async () => {
    const clock = createFakeClock(100 * DAY);
    const now = clock.now();
    const runs = [
      { id: "dpl-5d", el: "1", end: now - 5 * DAY },
      { id: "dpl-own-5d", el: "2", end: now - 5 * DAY },
      { id: "keep-900d", el: "3", end: now - 900 * DAY },
      { id: "py-2d", el: "4", end: now - 2 * DAY },
    ];
    const mem = memoryStore(
      [
        element("1", "DPL"),
        element("2", "DPL", { retentionDays: 3 }),
        element("3", "DPL", { retentionDays: 0 }),
        element("4", "PY"),
      ],
      runs,
    );
    const retention = createRetention({
      store: mem.store,
      clock,
      logger: silent,
      config: { days: 30, batch: 10, sweepMs: 0, dataDir },
    });
    const preview = await retention.preview(null);
    assert.deepEqual(
      preview.map((p) => [p.elementId, p.rule.source, p.rule.days, p.runs]),
      [
        ["1", "global", 30, 0],
        ["2", "configure", 3, 1],
        ["4", "declaration", 1, 1],
      ],
    );
    await retention.pass();
    assert.deepEqual(
      mem.runs.map((r) => r.id),
      ["dpl-5d", "keep-900d"],
    );
  });

  it("runs a pass every RUN_RETENTION_SWEEP_MS on the injected clock, and stops", async () => {
    const clock = createFakeClock(100 * DAY);
    const runs = [{ id: "old", el: "1", end: 0 }];
    const mem = memoryStore([element("1", "DPL")], runs);
    const retention = createRetention({
      store: mem.store,
      clock,
      logger: silent,
      config: { days: 30, batch: 10, sweepMs: 60_000, dataDir },
    });
    const passes: PassResult[] = [];
    let seen: () => void = () => {};
    retention.onPass((r) => {
      passes.push(r);
      seen();
    });
    const next = () =>
      within(
        new Promise<void>((resolve) => {
          seen = resolve;
        }),
        10_000,
        "a retention pass",
      );
    retention.start();
    const first = next();
    await clock.advanceAsync(9_999);
    assert.equal(passes.length, 0, "nothing before the first delay");
    await clock.advanceAsync(1);
    await first;
    assert.equal(passes[0]?.runs, 1);
    runs.push({ id: "later", el: "1", end: 1 });
    const second = next();
    await clock.advanceAsync(60_000);
    await second;
    assert.equal(passes[1]?.runs, 1);
    await retention.stop();
    assert.equal(clock.pending(), 0, "no timer left after stop");
  });
});
