/**
 * Wires the cron scheduler core to flows (docs/flow-graph.md): APPROVED flows' cron triggers become
 * schedules, deploys and status changes take effect at once, and every fire starts a SCHEDULED
 * run with the trigger's parameter. Each tick is claimed in the database before the run starts,
 * so a cluster of processes sharing one PostgreSQL starts one run per tick.
 */
import type { Clock, TimerHandle } from "../clock.ts";
import { normalizeConfigure, type Trigger } from "../flows/graph.ts";
import type { FlowLifecycle } from "../flows/lifecycle.ts";
import type { FlowRuns } from "../runs/flow-runs.ts";
import type { Element, Scope, Store } from "../store/types.ts";
import { createDbScheduleState } from "./db-schedule-state.ts";
import { startWithinWindow } from "./refused-retry.ts";
import {
  createScheduler,
  type Schedule,
  type ScheduleOverview,
  type SchedulerLogger,
} from "./scheduler.ts";

export interface FlowSchedules {
  /** The flow's schedules (GET /monitor/flows). */
  schedules(elementId: string): ScheduleOverview[];
  nextSchedule(elementId: string): ScheduleOverview | undefined;
  /** Re-reads every flow release from the database: picks up deploys made through other nodes. */
  resync(): Promise<void>;
  /** Forgets old tick claims (at most hourly; the resync timer calls it). */
  prune(): Promise<void>;
  /** Resolves once every lifecycle change seen so far has reached the scheduler. */
  settled(): Promise<void>;
  stop(): void;
}

export interface AttachSchedulerDeps {
  store: Store;
  lifecycle: Pick<FlowLifecycle, "onChange">;
  flows: Pick<FlowRuns, "start">;
  clock: Clock;
  logger: SchedulerLogger;
  config: {
    /** How often to re-read flow releases (other nodes' deploys); 0 disables. */
    scheduleSyncMs: number;
  };
  /**
   * Flow changes between the nodes sharing the database (the cluster's NOTIFY bridge); absent
   * when no other node schedules. A change made here is published; one made elsewhere is read
   * back at once (docs/scheduler.md, "In a cluster").
   */
  shared?: FlowChangeBus | null | undefined;
}

export interface FlowChangeBus {
  publishFlowChange(elementId: string): void;
  /** `null`: changes may have been missed; re-read every flow. */
  onFlowChange(fn: (elementId: string | null) => void): void;
}

interface Known {
  scope: Scope;
  version: number | null;
  triggers: Trigger[];
  approved: boolean;
  /** Value of `changes` at the last local lifecycle change: a resync older than it must not undo it. */
  changedAt: number;
}

const CLAIM_KEEP_MS = 86_400_000;
const PRUNE_EVERY_MS = 3_600_000;
const START_LANES = 16;

const cronTriggers = (configure: unknown): Trigger[] =>
  normalizeConfigure(configure).triggers.filter((t) => t.type === "cron");

export async function attachScheduler(deps: AttachSchedulerDeps): Promise<FlowSchedules> {
  const { store, clock, logger } = deps;
  const known = new Map<string, Known>();
  const pending = new Map<string, Promise<void>>();
  let changes = 0;
  let syncTimer: TimerHandle | undefined;
  let stopped = false;
  let prunedAt = Number.NEGATIVE_INFINITY;

  // The scheduler fires everything due in one synchronous loop; those claims go to the database
  // together on the next macrotask (one insert per 500), instead of 10,000 racing single inserts.
  let batch: { scheduleId: string; tick: number; settle: (won: boolean | Error) => void }[] = [];
  function claim(scheduleId: string, tick: number): Promise<boolean> {
    return new Promise((resolve, reject) => {
      if (batch.length === 0) setImmediate(flushClaims);
      batch.push({
        scheduleId,
        tick,
        settle: (won) => (won instanceof Error ? reject(won) : resolve(won)),
      });
    });
  }
  function flushClaims(): void {
    const items = batch;
    batch = [];
    store.claimScheduleTicks(items).then(
      (won) => {
        for (const c of items) c.settle(won.has(`${c.scheduleId}@${c.tick}`));
      },
      (err: unknown) => {
        const e = err instanceof Error ? err : new Error(String(err));
        for (const c of items) c.settle(e);
      },
    );
  }

  // Run starts one after another in a few lanes: thousands at once only queue up in the store.
  let starting = 0;
  const waiting: (() => void)[] = [];
  async function limited(fn: () => Promise<unknown>): Promise<void> {
    while (starting >= START_LANES) await new Promise<void>((r) => waiting.push(r));
    starting++;
    try {
      await fn();
    } finally {
      starting--;
      waiting.shift()?.();
    }
  }

  async function fire(schedule: Schedule, tick: number): Promise<void> {
    // Claim first: of all nodes firing this tick, only the one whose claim lands starts the run.
    if (!(await claim(schedule.scheduleId, tick))) return;
    // Read again on every try: a retry must not start a flow deactivated meanwhile.
    const start = async () => {
      const flow = known.get(schedule.elementId);
      if (stopped || !flow?.approved) return false;
      await limited(() =>
        deps.flows.start({
          scope: flow.scope,
          user: null,
          locator: { elementId: schedule.elementId, elementType: "DPL" },
          parameter: schedule.parameter,
          inProcess: false,
          trigger: "SCHEDULED",
        }),
      );
      return true;
    };
    await startWithinWindow({ clock, logger }, schedule, tick, start);
  }

  const scheduler = createScheduler({ clock, logger, fire, store: createDbScheduleState(store) });

  function apply(elementId: string, next: Omit<Known, "changedAt">, changedAt: number): void {
    known.set(elementId, { ...next, changedAt });
    scheduler.upsertFlow(elementId, next.triggers, next.approved);
  }

  async function loadTriggers(elementId: string, version: number): Promise<Trigger[]> {
    const rev = await store.flowRevision(elementId, version);
    return rev ? cronTriggers(rev.configure) : [];
  }

  function onChange(el: Element): void {
    if (el.type !== "DPL") return;
    deps.shared?.publishFlowChange(el.id);
    const stamp = ++changes;
    const approved = el.status === "APPROVED";
    const prev = known.get(el.id);
    if (prev && prev.version === el.releaseVersion && !pending.has(el.id)) {
      // Activate or deactivate: same release, so no database read and the change is immediate.
      apply(el.id, { ...prev, scope: el.scope, approved }, stamp);
      return;
    }
    // A new release: read its triggers. Changes of one flow are applied in the order they came.
    const version = el.releaseVersion;
    const before = pending.get(el.id) ?? Promise.resolve();
    const job = before
      .then(async () => {
        const triggers = version === null ? [] : await loadTriggers(el.id, version);
        apply(el.id, { scope: el.scope, version, triggers, approved }, stamp);
      })
      .catch((err: unknown) => logger.error({ err, elementId: el.id }, "could not schedule flow"))
      .finally(() => {
        if (pending.get(el.id) === job) pending.delete(el.id);
      });
    pending.set(el.id, job);
  }

  async function resync(): Promise<void> {
    const startedAt = changes;
    const rows = await store.flowReleases();
    const seen = new Set<string>();
    for (const row of rows) {
      seen.add(row.elementId);
      const k = known.get(row.elementId);
      // A local change newer than this read wins; it is already applied or on its way.
      if (k && (k.changedAt > startedAt || pending.has(row.elementId))) continue;
      if (k && k.approved === row.approved && k.version === row.version) continue;
      const triggers =
        k && k.version === row.version ? k.triggers : cronTriggers(JSON.parse(row.configureJson));
      const next = { scope: row.scope, version: row.version, triggers, approved: row.approved };
      apply(row.elementId, next, startedAt);
    }
    for (const [id, k] of known) {
      if (!k.approved || seen.has(id) || k.changedAt > startedAt || pending.has(id)) continue;
      apply(id, { ...k, approved: false }, startedAt); // gone from the database meanwhile
    }
  }

  /**
   * Claims only matter while some node may still fire that tick: a day covers any lag; catch-up
   * after longer downtime fires the latest missed tick, which is recent. Pruned hourly.
   */
  async function prune(): Promise<void> {
    const now = clock.now();
    if (now - prunedAt < PRUNE_EVERY_MS) return;
    prunedAt = now;
    await store.pruneScheduleFires(now - CLAIM_KEEP_MS);
  }

  function scheduleSync(): void {
    if (stopped || deps.config.scheduleSyncMs <= 0) return;
    syncTimer = clock.setTimeout(() => {
      Promise.all([resync(), prune()])
        .catch((err: unknown) => logger.error({ err }, "schedule resync failed"))
        .finally(scheduleSync);
    }, deps.config.scheduleSyncMs);
    syncTimer.unref?.();
  }

  // Another node's changes: one re-read at a time, and one more if any came in during it.
  let rereading: Promise<void> | null = null;
  let again = false;
  function reread(): void {
    if (rereading) {
      again = true;
      return;
    }
    rereading = resync()
      .catch((err: unknown) => logger.error({ err }, "schedule resync failed"))
      .finally(() => {
        rereading = null;
        if (again && !stopped) {
          again = false;
          reread();
        }
      });
  }

  // Listen before reading, so a deploy made while we read is not missed.
  deps.lifecycle.onChange(onChange);
  deps.shared?.onFlowChange(() => {
    if (!stopped) reread();
  });
  await resync();
  await scheduler.start();
  scheduleSync();

  return {
    schedules: (id) => scheduler.schedules(id),
    nextSchedule: (id) => scheduler.nextSchedule(id),
    resync,
    prune,
    async settled() {
      await Promise.all(pending.values());
    },
    stop() {
      stopped = true;
      if (syncTimer) clock.clearTimeout(syncTimer);
      scheduler.stop();
    },
  };
}
