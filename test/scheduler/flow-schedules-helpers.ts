import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import type { Trigger } from "../../src/flows/graph.ts";
import type { StartRequest } from "../../src/runs/flow-runs.ts";
import { attachScheduler, type FlowSchedules } from "../../src/scheduler/flow-schedules.ts";
import { type OpenedStore, openStore } from "../../src/store/open-store.ts";
import type { Element } from "../../src/store/types.ts";
import type { FakeClock } from "./fake-clock.ts";

export const SCOPE = { app: "a", space: "s" };
export const silent = { warn() {}, error() {}, info() {} };

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
    store,
    lifecycle: { onChange: (l) => listeners.push(l) },
    flows: {
      async start(req) {
        starts.push(req);
        return `run-${starts.length}`;
      },
    },
    clock,
    logger: silent,
    config: { scheduleSyncMs: 0 },
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

/** Let real I/O (database claims) finish: the fire path awaits the store. */
export async function until(cond: () => boolean, ms = 2000): Promise<void> {
  const end = Date.now() + ms;
  while (!cond()) {
    if (Date.now() > end) throw new Error("condition not met in time");
    await new Promise((r) => setTimeout(r, 2));
  }
}

/** Let pending I/O settle without expecting anything (for "nothing fired" checks). */
export const settle = () => new Promise((r) => setTimeout(r, 30));
