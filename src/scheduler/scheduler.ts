/**
 * Cron scheduler (docs/flow-graph.md). One timer for all schedules: a min-heap keyed by each schedule's
 * next tick, and the timer is set (through the injected Clock) for the earliest one only, so
 * 10,000 schedules cost one timer and O(log n) per fire. Behaviour is described in
 * docs/scheduler.md; in short:
 * - a schedule fires only while its flow is approved and the scheduler is started;
 * - catch-up: when ticks were missed (downtime, stop/start, a stalled event loop, a wall-clock jump
 *   forward), a schedule fires once, for the latest missed tick, then continues with future ticks;
 * - a tick at or before a schedule's `lastRunAt` never fires, so a clock jump back cannot repeat one.
 */
import type { Clock } from "../clock.ts";
import { isCronTrigger } from "../flows/cron-triggers.ts";
import type { Trigger } from "../flows/graph.ts";
import { createSpecCache, DEFAULT_TIMEZONE, nextTick, scheduleIdFor } from "./cron-spec.ts";
import { createMemoryScheduleState, type ScheduleState } from "./schedule-state.ts";
import {
  acquireSpec,
  arm,
  clearTimer,
  drop,
  type Entry,
  type FlowState,
  reschedule,
  type Schedule,
  type SchedulerLogger,
  type SchedulerState,
} from "./scheduler-timer.ts";
import { TickHeap } from "./tick-heap.ts";

export { MAX_TIMER_DELAY_MS, type Schedule, type SchedulerLogger } from "./scheduler-timer.ts";

/** One schedule as the monitor shows it; times are epoch ms. */
export interface ScheduleOverview {
  name: string;
  crontab: string;
  timezone: string;
  scheduleId: string;
  /** Tick time of the last fire. */
  lastRunAt?: number;
  /** First tick after now (and after lastRunAt); absent while the flow is not approved. */
  nextRunAt?: number;
}

export interface SchedulerDeps {
  clock: Clock;
  logger: SchedulerLogger;
  /** Starts the run. Not awaited one by one: a slow or failing fire never delays other schedules. */
  fire(schedule: Schedule, tickMs: number): Promise<void>;
  store?: ScheduleState;
  /** LIMIT_SCHEDULE_MIN_INTERVAL_S in ms: one tick per window of it (cron-spec.ts); 0: none. */
  minIntervalMs?: number;
}

export interface Scheduler {
  /**
   * Deploy, activate or deactivate a flow; takes effect at once. Schedules are matched by trigger
   * name: a kept name keeps its scheduleId and lastRunAt, a removed name's schedule disappears.
   * Non-cron triggers are ignored.
   */
  upsertFlow(elementId: string, triggers: readonly Trigger[], approved: boolean): void;
  removeFlow(elementId: string): void;
  /** The flow's schedules in trigger order; [] for an unknown flow. */
  schedules(elementId: string): ScheduleOverview[];
  /** The schedule that fires next; while not approved, the first one (docs/monitoring.md, `/monitor/flows`). */
  nextSchedule(elementId: string): ScheduleOverview | undefined;
  /**
   * Load lastRunAt from the store and arm every approved schedule, catching up missed ticks once.
   * Register the flows known at boot before calling it, so their missed ticks are caught up.
   */
  start(): Promise<void>;
  /** Clear the timer; nothing fires until the next start(). */
  stop(): void;
}

const maxDefined = (a: number | undefined, b: number | undefined): number | undefined =>
  a === undefined ? b : b === undefined ? a : Math.max(a, b);

export function createScheduler(deps: SchedulerDeps): Scheduler {
  const s: SchedulerState = {
    clock: deps.clock,
    logger: deps.logger,
    fire: deps.fire,
    store: deps.store ?? createMemoryScheduleState(),
    specs: createSpecCache(deps.minIntervalMs),
    flows: new Map(),
    heap: new TickHeap<Entry>(),
    persisted: null,
    running: false,
    starting: null,
    generation: 0,
    timer: undefined,
    timerFor: Number.NaN,
  };
  return {
    upsertFlow: (elementId, triggers, approved) => upsertFlow(s, elementId, triggers, approved),
    removeFlow: (elementId) => removeFlow(s, elementId),
    schedules: (elementId) => schedulesOf(s, elementId),
    nextSchedule: (elementId) => nextSchedule(s, elementId),
    start: () => start(s),
    stop: () => stop(s),
  };
}

function upsertFlow(
  s: SchedulerState,
  elementId: string,
  triggers: readonly Trigger[],
  approved: boolean,
): void {
  const now = s.clock.now();
  const prev = s.flows.get(elementId);
  const wasApproved = prev?.approved ?? false;
  const flow: FlowState = prev ?? { approved, entries: [] };
  flow.approved = approved;
  const old = new Map(flow.entries.map((e) => [e.schedule.name, e]));
  const entries: Entry[] = [];
  for (const t of triggers) {
    if (!isCronTrigger(t)) continue;
    const timezone = t.timezone ?? DEFAULT_TIMEZONE;
    const schedule: Schedule = {
      scheduleId: scheduleIdFor(elementId, t.name),
      elementId,
      name: t.name,
      crontab: t.crontab,
      timezone,
      parameter: t.parameter,
    };
    if (entries.some((e) => e.schedule.name === t.name)) {
      s.logger.warn({ elementId, name: t.name }, "duplicate cron trigger name ignored");
      continue;
    }
    const kept = old.get(t.name);
    if (kept) {
      old.delete(t.name);
      keepEntry(s, kept, schedule, approved !== wasApproved, now);
      entries.push(kept);
      continue;
    }
    const entry = newEntry(s, schedule, flow);
    arm(s, entry, now, false);
    entries.push(entry);
  }
  for (const gone of old.values()) drop(s, gone);
  flow.entries = entries;
  s.flows.set(elementId, flow);
  reschedule(s);
}

/** A trigger whose name the flow had before: its entry takes the new schedule. */
function keepEntry(
  s: SchedulerState,
  kept: Entry,
  schedule: Schedule,
  approvalChanged: boolean,
  now: number,
): void {
  const { crontab, timezone, elementId, name } = schedule;
  const specChanged = kept.schedule.crontab !== crontab || kept.schedule.timezone !== timezone;
  kept.schedule = schedule;
  if (specChanged) {
    if (kept.spec) s.specs.release(kept.spec);
    kept.spec = acquireSpec(s, crontab, timezone, { elementId, name });
  }
  // An unchanged, still-approved schedule keeps its place; anything else re-arms from now.
  if (specChanged || approvalChanged) arm(s, kept, now, false);
}

function newEntry(s: SchedulerState, schedule: Schedule, flow: FlowState): Entry {
  const { crontab, timezone, elementId, name, scheduleId } = schedule;
  return {
    due: Number.NaN,
    heapIndex: -1,
    schedule,
    spec: acquireSpec(s, crontab, timezone, { elementId, name }),
    lastRunAt: s.persisted?.get(scheduleId),
    flow,
    removed: false,
  };
}

function removeFlow(s: SchedulerState, elementId: string): void {
  const flow = s.flows.get(elementId);
  if (!flow) return;
  for (const entry of flow.entries) drop(s, entry);
  s.flows.delete(elementId);
  reschedule(s);
}

function overview(entry: Entry, now: number): ScheduleOverview {
  const { name, crontab, timezone, scheduleId } = entry.schedule;
  const out: ScheduleOverview = { name, crontab, timezone, scheduleId };
  if (entry.lastRunAt !== undefined) out.lastRunAt = entry.lastRunAt;
  if (entry.flow.approved && entry.spec !== null) {
    const next = nextTick(entry.spec, Math.max(now, entry.lastRunAt ?? Number.NEGATIVE_INFINITY));
    if (next !== null) out.nextRunAt = next;
  }
  return out;
}

function schedulesOf(s: SchedulerState, elementId: string): ScheduleOverview[] {
  const flow = s.flows.get(elementId);
  if (!flow) return [];
  const now = s.clock.now();
  return flow.entries.map((e) => overview(e, now));
}

function nextSchedule(s: SchedulerState, elementId: string): ScheduleOverview | undefined {
  const all = schedulesOf(s, elementId);
  let best = all[0];
  for (const o of all) {
    if (
      o.nextRunAt !== undefined &&
      (best?.nextRunAt === undefined || o.nextRunAt < best.nextRunAt)
    )
      best = o;
  }
  return best;
}

function start(s: SchedulerState): Promise<void> {
  if (s.running) return Promise.resolve();
  if (s.starting) return s.starting;
  const gen = s.generation;
  s.starting = (async () => {
    let loaded: Map<string, number>;
    try {
      loaded = await s.store.load();
    } catch (err) {
      s.logger.error({ err }, "could not load schedule state; starting without catch-up");
      loaded = new Map();
    }
    if (gen !== s.generation) return;
    s.persisted ??= new Map();
    const { persisted } = s;
    for (const [id, at] of loaded) persisted.set(id, maxDefined(persisted.get(id), at) ?? at);
    s.running = true;
    const now = s.clock.now();
    for (const flow of s.flows.values()) {
      for (const entry of flow.entries) {
        entry.lastRunAt = maxDefined(entry.lastRunAt, persisted.get(entry.schedule.scheduleId));
        arm(s, entry, now, true);
      }
    }
    reschedule(s);
  })().finally(() => {
    s.starting = null;
  });
  return s.starting;
}

function stop(s: SchedulerState): void {
  s.generation++;
  s.running = false;
  clearTimer(s);
  for (const flow of s.flows.values()) for (const entry of flow.entries) s.heap.delete(entry);
}
