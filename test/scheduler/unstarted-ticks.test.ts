import assert from "node:assert/strict";
import { describe, it } from "node:test";
import type { Trigger } from "../../src/flows/graph.ts";
import { scheduleIdFor } from "../../src/scheduler/cron-spec.ts";
import { startUnstartedTicks } from "../../src/scheduler/unstarted-ticks.ts";

/**
 * A claimed tick with no SCHEDULED run since (docs/scheduler.md, "A tick claimed by a process that
 * died"): started at the next start, unless the flow's runs are kept for less than the tick's age.
 * Then no run since means nothing: its run may have been stored, run and deleted by retention, and
 * starting it again would repeat a weekly job at whatever restart came next.
 */
const DAY_MS = 86_400_000;
// A Monday 00:00 UTC: the weekly trigger's tick.
const TICK = Date.UTC(2026, 10, 23);
const weekly: Trigger = { type: "cron", name: "weekly", crontab: "0 0 * * 1", timezone: "UTC" };
const quiet = { info() {}, warn() {}, error() {}, debug() {} };

async function started(nowDaysAfter: number, keptDays: number): Promise<number[]> {
  const ticks: number[] = [];
  await startUnstartedTicks({
    store: {
      loadScheduleState: async () => new Map([[scheduleIdFor("1", "weekly"), TICK]]),
      scheduledRunSince: async () => false,
    },
    logger: quiet,
    flows: new Map([
      ["1", { scope: { app: "a", space: "s" }, approved: true, triggers: [weekly] }],
    ]),
    now: TICK + nowDaysAfter * DAY_MS,
    windowMs: 0,
    keptDays: async () => keptDays,
    start: async (_schedule, tick) => {
      ticks.push(tick);
    },
  });
  return ticks;
}

describe("unstarted ticks", () => {
  it("starts a claimed tick with no run since, its runs kept for good or longer than its age", async () => {
    assert.deepEqual(await started(3, 0), [TICK]);
    assert.deepEqual(await started(3, 7), [TICK]);
  });

  it("leaves a tick older than its flow's retention: its run may have been deleted", async () => {
    assert.deepEqual(await started(3, 1), []);
    assert.deepEqual(await started(3, 3), []);
  });
});
