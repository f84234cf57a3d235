/**
 * Wires the cron scheduler core to flows (docs/flow-graph.md): APPROVED flows' cron triggers become
 * schedules, deploys and status changes take effect at once, and every fire starts a SCHEDULED
 * run with the trigger's parameter. Each tick is claimed in the database before the run starts,
 * so a cluster of processes sharing one PostgreSQL starts one run per tick.
 */
import type { Clock, TimerHandle } from "../clock.ts";
import { isCronTrigger } from "../flows/cron-triggers.ts";
import { normalizeConfigure, type Trigger } from "../flows/graph.ts";
import type { FlowLifecycle } from "../flows/lifecycle.ts";
import type { FlowRuns } from "../runs/flow-runs.ts";
import type { Element, Scope, Store } from "../store/types.ts";
import { isUniqueViolation } from "../store/unique-violation.ts";
import { createDbScheduleState } from "./db-schedule-state.ts";
import { startWithinWindow } from "./refused-retry.ts";
import {
  createScheduler,
  type Schedule,
  type ScheduleOverview,
  type Scheduler,
  type SchedulerLogger,
} from "./scheduler.ts";
import { createStartLanes, type StartLanes } from "./start-lanes.ts";
import { createTickClaims } from "./tick-claims.ts";
import { flowKeptDays, startUnstartedTicks, tickRunId } from "./unstarted-ticks.ts";

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
    /** LIMIT_SCHEDULED_STARTS_PER_APP: an app's ticks on their way at once (start-lanes.ts). */
    scheduledStartsPerApp: number;
    /** LIMIT_SCHEDULE_MIN_INTERVAL_S in ms; 0: none (docs/scheduler.md). */
    scheduleMinIntervalMs?: number;
    /** RUN_RETENTION_DAYS (docs/retention.md): a flow's runs' retention unless it sets its own. */
    runRetentionDays?: number;
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

/** The state one attached scheduler keeps: the flows it knows and the work under way. */
interface FlowSched {
  deps: AttachSchedulerDeps;
  store: Store;
  clock: Clock;
  logger: SchedulerLogger;
  scheduler: Scheduler;
  known: Map<string, Known>;
  /** Each flow's lifecycle change being applied (its release's triggers being read). */
  pending: Map<string, Promise<void>>;
  changes: number;
  syncTimer: TimerHandle | undefined;
  stopped: boolean;
  prunedAt: number;
  claim: (scheduleId: string, tick: number) => Promise<boolean>;
  lanes: StartLanes;
  /** Ticks skipped per app since the last warning (the app had too many on their way). */
  skipped: Map<string, number>;
  rereading: Promise<void> | null;
  again: boolean;
}

const CLAIM_KEEP_MS = 86_400_000;
const PRUNE_EVERY_MS = 3_600_000;

const cronTriggers = (configure: unknown): Trigger[] =>
  normalizeConfigure(configure).triggers.filter(isCronTrigger);

export async function attachScheduler(deps: AttachSchedulerDeps): Promise<FlowSchedules> {
  const { store, clock, logger } = deps;
  const s: FlowSched = {
    deps,
    store,
    clock,
    logger,
    scheduler: createScheduler({
      clock,
      logger,
      fire: (schedule, tick) => fire(s, schedule, tick),
      store: createDbScheduleState(store),
      minIntervalMs: deps.config.scheduleMinIntervalMs ?? 0,
    }),
    known: new Map(),
    pending: new Map(),
    changes: 0,
    syncTimer: undefined,
    stopped: false,
    prunedAt: Number.NEGATIVE_INFINITY,
    claim: createTickClaims(store),
    lanes: createStartLanes(deps.config.scheduledStartsPerApp),
    skipped: new Map(),
    rereading: null,
    again: false,
  };
  const { scheduler } = s;
  // Listen before reading, so a deploy made while we read is not missed.
  deps.lifecycle.onChange((el) => onChange(s, el));
  deps.shared?.onFlowChange(() => {
    if (!s.stopped) reread(s);
  });
  await resync(s);
  await scheduler.start();
  scheduleSync(s);
  // Ticks claimed by a process that died before storing their runs (unstarted-ticks.ts).
  void startUnstartedTicks({
    store,
    logger,
    flows: s.known,
    now: clock.now(),
    windowMs: deps.config.scheduleMinIntervalMs ?? 0,
    keptDays: (elementId) =>
      flowKeptDays(store, elementId, s.known.get(elementId)?.version, deps.config.runRetentionDays),
    start: (schedule, tick) => fire(s, schedule, tick, true),
  });

  return {
    schedules: (id) => scheduler.schedules(id),
    nextSchedule: (id) => scheduler.nextSchedule(id),
    resync: () => resync(s),
    prune: () => prune(s),
    async settled() {
      await Promise.all(s.pending.values());
    },
    stop() {
      s.stopped = true;
      if (s.syncTimer) clock.clearTimeout(s.syncTimer);
      scheduler.stop();
    },
  };
}

/** One warning per app and wake-up for the ticks it had no room for. */
function skip(s: FlowSched, app: string): void {
  if (s.skipped.size === 0)
    setImmediate(() => {
      for (const [skippedApp, ticks] of s.skipped)
        s.logger.warn(
          { app: skippedApp, ticks },
          "scheduled ticks skipped: the app has LIMIT_SCHEDULED_STARTS_PER_APP on their way",
        );
      s.skipped.clear();
    });
  s.skipped.set(app, (s.skipped.get(app) ?? 0) + 1);
}

/** `claimed`: a tick claimed before this start whose run was never stored (unstarted-ticks.ts). */
async function fire(s: FlowSched, schedule: Schedule, tick: number, claimed = false) {
  const app = s.known.get(schedule.elementId)?.scope.app;
  if (app === undefined) return;
  // Not claimed: another node with room may still take the tick.
  if (!s.lanes.enter(app)) return skip(s, app);
  try {
    // Claim first: of all nodes firing this tick, only the one whose claim lands starts the run.
    if (claimed || (await s.claim(schedule.scheduleId, tick)))
      await startTick(s, schedule, tick, app);
  } finally {
    s.lanes.leave(app);
  }
}

async function startTick(s: FlowSched, schedule: Schedule, tick: number, app: string) {
  // Read again on every try: a retry must not start a flow deactivated meanwhile.
  const start = async () => {
    const flow = s.known.get(schedule.elementId);
    if (s.stopped || !flow?.approved) return false;
    await s.lanes
      .run(app, () =>
        s.deps.flows.start({
          scope: flow.scope,
          user: null,
          locator: { elementId: schedule.elementId, elementType: "DPL" },
          parameter: schedule.parameter,
          inProcess: false,
          trigger: "SCHEDULED",
          runId: tickRunId(schedule.scheduleId, tick),
        }),
      )
      .catch((err: unknown) => {
        // Its run stored by another process (a restart that found it missing): started.
        if (!isUniqueViolation(err)) throw err;
      });
    return true;
  };
  const windowMs = s.deps.config.scheduleMinIntervalMs ?? 0;
  await startWithinWindow({ clock: s.clock, logger: s.logger, windowMs }, schedule, tick, start);
}

function apply(
  s: FlowSched,
  elementId: string,
  next: Omit<Known, "changedAt">,
  changedAt: number,
): void {
  s.known.set(elementId, { ...next, changedAt });
  s.scheduler.upsertFlow(elementId, next.triggers, next.approved);
}

async function loadTriggers(s: FlowSched, elementId: string, version: number): Promise<Trigger[]> {
  const rev = await s.store.flowRevision(elementId, version);
  return rev ? cronTriggers(rev.configure) : [];
}

function onChange(s: FlowSched, el: Element): void {
  if (el.type !== "DPL") return;
  const { pending } = s;
  s.deps.shared?.publishFlowChange(el.id);
  const stamp = ++s.changes;
  const approved = el.status === "APPROVED";
  const prev = s.known.get(el.id);
  if (prev && prev.version === el.releaseVersion && !pending.has(el.id)) {
    // Activate or deactivate: same release, so no database read and the change is immediate.
    apply(s, el.id, { ...prev, scope: el.scope, approved }, stamp);
    return;
  }
  // A new release: read its triggers. Changes of one flow are applied in the order they came.
  const version = el.releaseVersion;
  const before = pending.get(el.id) ?? Promise.resolve();
  const job = before
    .then(async () => {
      const triggers = version === null ? [] : await loadTriggers(s, el.id, version);
      apply(s, el.id, { scope: el.scope, version, triggers, approved }, stamp);
    })
    .catch((err: unknown) => s.logger.error({ err, elementId: el.id }, "could not schedule flow"))
    .finally(() => {
      if (pending.get(el.id) === job) pending.delete(el.id);
    });
  pending.set(el.id, job);
}

async function resync(s: FlowSched): Promise<void> {
  const { known, pending } = s;
  const startedAt = s.changes;
  const rows = await s.store.flowReleases();
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
    apply(s, row.elementId, next, startedAt);
  }
  for (const [id, k] of known) {
    if (!k.approved || seen.has(id) || k.changedAt > startedAt || pending.has(id)) continue;
    apply(s, id, { ...k, approved: false }, startedAt); // gone from the database meanwhile
  }
}

/**
 * Claims only matter while some node may still fire that tick: a day covers any lag; catch-up
 * after longer downtime fires the latest missed tick, which is recent. Pruned hourly.
 */
async function prune(s: FlowSched): Promise<void> {
  const now = s.clock.now();
  if (now - s.prunedAt < PRUNE_EVERY_MS) return;
  s.prunedAt = now;
  await s.store.pruneScheduleFires(now - CLAIM_KEEP_MS);
}

function scheduleSync(s: FlowSched): void {
  const { scheduleSyncMs } = s.deps.config;
  if (s.stopped || scheduleSyncMs <= 0) return;
  s.syncTimer = s.clock.setTimeout(() => {
    Promise.all([resync(s), prune(s)])
      .catch((err: unknown) => s.logger.error({ err }, "schedule resync failed"))
      .finally(() => scheduleSync(s));
  }, scheduleSyncMs);
  s.syncTimer.unref?.();
}

/** Another node's changes: one re-read at a time, and one more if any came in during it. */
function reread(s: FlowSched): void {
  if (s.rereading) {
    s.again = true;
    return;
  }
  s.rereading = resync(s)
    .catch((err: unknown) => s.logger.error({ err }, "schedule resync failed"))
    .finally(() => {
      s.rereading = null;
      if (s.again && !s.stopped) {
        s.again = false;
        reread(s);
      }
    });
}
