import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import type { Trigger } from "../../src/flows/graph.ts";
import type { StartRequest } from "../../src/runs/flow-runs.ts";
import { attachScheduler, type FlowSchedules } from "../../src/scheduler/flow-schedules.ts";
import { type OpenedStore, openStore } from "../../src/store/open-store.ts";
import type { Element } from "../../src/store/types.ts";
import { condition } from "../helpers/wait.ts";
import type { FakeClock } from "./fake-clock.ts";

export const SCOPE = { app: "a", space: "s" };
export const silent = { warn() {}, error() {}, info() {} };

/** Changes on every run a rig's scheduler starts. */
const fired = condition();
/** The tick claims of every rig's scheduler still on their way to the database. */
const claiming = new Set<Promise<unknown>>();

/** The store as the scheduler sees it: its tick claims are tracked (`settle` awaits them). */
function trackingClaims(store: OpenedStore): OpenedStore {
  return new Proxy(store, {
    get(target, key) {
      if (key === "claimScheduleTicks") {
        return (items: Parameters<OpenedStore["claimScheduleTicks"]>[0]) => {
          const p = target.claimScheduleTicks(items);
          const tracked = p.finally(() => claiming.delete(tracked));
          claiming.add(tracked);
          return p;
        };
      }
      const v: unknown = Reflect.get(target, key);
      return typeof v === "function" ? v.bind(target) : v;
    },
  });
}

/** A scheduler wired to a real store, a fake lifecycle (we emit changes) and a recording `flows`. */
export interface Rig {
  store: OpenedStore;
  schedules: FlowSchedules;
  starts: StartRequest[];
  emit(el: Element): void;
  deploy(name: string, triggers: Trigger[]): Promise<Element>;
  setStatus(id: string, status: "APPROVED" | "OBSOLETE"): Promise<Element>;
  close(): Promise<void>;
}

export async function rig(
  clock: FakeClock,
  opts: { databaseUrl?: string; dataDir?: string } = {},
): Promise<Rig> {
  const dataDir = opts.dataDir ?? fs.mkdtempSync(path.join(os.tmpdir(), "sluice-sched-"));
  const store = await openStore({ databaseUrl: opts.databaseUrl, dataDir });
  const listeners: ((e: Element) => void)[] = [];
  const starts: StartRequest[] = [];
  const emit = (el: Element) => {
    for (const l of listeners) l(el);
  };
  const schedules = await attachScheduler({
    store: trackingClaims(store),
    lifecycle: { onChange: (l) => listeners.push(l) },
    flows: {
      async start(req) {
        starts.push(req);
        fired.changed();
        return `run-${starts.length}`;
      },
    },
    clock,
    logger: silent,
    config: { scheduleSyncMs: 0, scheduledStartsPerApp: 10_000 },
  });
  const folder = await store.ensureFolder(SCOPE, "/", clock.now());
  return {
    store,
    schedules,
    starts,
    emit,
    async deploy(name, triggers) {
      const { element } = await store.deployFlow({
        scope: SCOPE,
        folderId: folder.id,
        name,
        revisionName: "r",
        flow: { vertexes: [] },
        configure: { triggers },
        description: null,
        user: null,
        now: clock.now(),
      });
      emit(element);
      await schedules.settled();
      return element;
    },
    async setStatus(id, status) {
      await store.setFlowStatus(id, status, null, clock.now());
      const el = await store.elementById(SCOPE, id);
      if (!el) throw new Error("element vanished");
      emit(el);
      return el;
    },
    async close() {
      schedules.stop();
      await store.close();
      if (!opts.dataDir) fs.rmSync(dataDir, { recursive: true, force: true });
    },
  };
}

/** Resolves once `cond` holds, re-checked on every run a rig starts; fails after `ms`. */
export function until(cond: () => boolean, ms = 2000): Promise<void> {
  return fired.until(cond, "the scheduler started the runs expected", ms);
}

const turn = () => new Promise((r) => setImmediate(r));

/**
 * Waits out whatever the ticks fired so far set going, without expecting anything (for "nothing
 * fired" checks): their claims are sent on the next turn of the event loop; once every claim has
 * been answered and the turn after it ran, a won claim has started its run.
 */
export async function settle(): Promise<void> {
  await turn();
  while (claiming.size > 0) await Promise.all([...claiming].map((p) => p.catch(() => {})));
  await turn();
}
