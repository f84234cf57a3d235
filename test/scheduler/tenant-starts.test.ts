import assert from "node:assert/strict";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { after, before, describe, it } from "node:test";
import type { Trigger } from "../../src/flows/graph.ts";
import type { StartRequest } from "../../src/runs/flow-runs.ts";
import { attachScheduler, type FlowSchedules } from "../../src/scheduler/flow-schedules.ts";
import { type OpenedStore, openStore } from "../../src/store/open-store.ts";
import type { Element, Scope } from "../../src/store/types.ts";
import { condition } from "../helpers/wait.ts";
import { createFakeClock, type FakeClock } from "./fake-clock.ts";
import { silent } from "./flow-schedules-helpers.ts";

/**
 * One app's flood of ticks against another app's schedule (docs/scheduler.md, "Apps share the
 * scheduler"): the attacker's run starts hang (a store that has stopped answering it, a queue
 * that takes each one slowly), and it has far more schedules due than there are start lanes.
 */

const ATTACKER: Scope = { app: "flood", space: "s" };
const VICTIM: Scope = { app: "victim", space: "s" };
const T0 = Date.UTC(2025, 0, 1, 0, 0, 0);
const FLOOD = 300;
const PER_APP = 40;
const everySecond = (n: number): Trigger[] =>
  Array.from({ length: n }, (_, i) => ({ type: "cron", name: `t${i}`, crontab: "* * * * * *" }));

describe("an app's flood of scheduled starts", () => {
  let clock: FakeClock;
  let store: OpenedStore;
  let schedules: FlowSchedules;
  let dataDir: string;
  const started: StartRequest[] = [];
  const changed = condition();
  const hung: (() => void)[] = [];
  const listeners: ((e: Element) => void)[] = [];

  async function deploy(scope: Scope, name: string, triggers: Trigger[]): Promise<void> {
    const folder = await store.ensureFolder(scope, "/", clock.now());
    const { element } = await store.deployFlow({
      scope,
      folderId: folder.id,
      name,
      revisionName: "r",
      flow: { vertexes: [] },
      configure: { triggers },
      description: null,
      user: null,
      now: clock.now(),
    });
    await store.setFlowStatus(element.id, "APPROVED", null, clock.now());
    const el = await store.elementById(scope, element.id);
    if (!el) throw new Error("element vanished");
    for (const l of listeners) l(el);
    await schedules.settled();
  }

  before(async () => {
    clock = createFakeClock(T0);
    dataDir = fs.mkdtempSync(path.join(os.tmpdir(), "sluice-tenants-"));
    store = await openStore({ dataDir });
    schedules = await attachScheduler({
      store,
      lifecycle: { onChange: (l) => listeners.push(l) },
      flows: {
        start(req) {
          started.push(req);
          changed.changed();
          if (req.scope.app === VICTIM.app) return Promise.resolve("victim-run");
          return new Promise<string>((resolve) => hung.push(() => resolve("flood-run")));
        },
      },
      clock,
      logger: silent,
      config: { scheduleSyncMs: 0, scheduledStartsPerApp: PER_APP },
    });
    await deploy(ATTACKER, "flood", everySecond(FLOOD));
  });
  after(async () => {
    for (const release of hung) release();
    schedules.stop();
    await store.close();
    fs.rmSync(dataDir, { recursive: true, force: true });
  });

  it("does not hold back another app's start behind its own", async () => {
    await clock.advanceAsync(1000);
    await changed.until(() => started.length > 0, "the flood's first starts", 5000);
    // The flood's starts of its first tick now hold the lanes; the victim's schedule comes next.
    await deploy(VICTIM, "mine", [{ type: "cron", name: "v", crontab: "* * * * * *" }]);
    await clock.advanceAsync(1000);
    await changed.until(
      () => started.some((r) => r.scope.app === VICTIM.app),
      "the victim's scheduled run started while the flood's starts hang",
      5000,
    );
  });

  it("keeps at most its share of starts waiting; the rest of its ticks are not claimed", async () => {
    const before = started.filter((r) => r.scope.app === ATTACKER.app).length;
    assert.ok(before <= PER_APP, `${before} flood starts under way`);
    await clock.advanceAsync(1000);
    await changed.until(
      () => started.filter((r) => r.scope.app === VICTIM.app).length >= 2,
      "the victim's second tick started",
      5000,
    );
    const claims = await store.db
      .selectFrom("schedule_fires")
      .select((eb) => eb.fn.countAll<number>().as("n"))
      .executeTakeFirstOrThrow();
    // Three ticks: the victim's two, and of the flood's only those it had room for (all hang).
    assert.ok(Number(claims.n) <= 2 + PER_APP, `${claims.n} tick claims stored`);
  });
});
