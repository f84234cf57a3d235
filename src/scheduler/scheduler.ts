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
import type { Clock, TimerHandle } from "../clock.ts";
import type { Trigger } from "../flows/graph.ts";
import {
  type CronSpec,
  createSpecCache,
  DEFAULT_TIMEZONE,
  nextTick,
  previousTick,
  scheduleIdFor,
} from "./cron-spec.ts";
import { createMemoryScheduleState, type ScheduleState } from "./schedule-state.ts";
import { type HeapItem, TickHeap } from "./tick-heap.ts";

/**
 * Longest single timer wait. Timers run on monotonic time while ticks are wall-clock times, so a
 * wall-clock jump forward is only noticed when a timer wakes; this bounds the delay (and stays
 * far below setTimeout's 2^31 ms limit for yearly schedules).
 */
export const MAX_TIMER_DELAY_MS = 60_000;

/** What `fire` receives: everything needed to start a SCHEDULED run. */
export interface Schedule {
  readonly scheduleId: string;
  readonly elementId: string;
  readonly name: string;
  readonly crontab: string;
  readonly timezone: string;
  readonly parameter: unknown;
}

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

export interface SchedulerLogger {
  warn(obj: unknown, msg?: string): void;
  error(obj: unknown, msg?: string): void;
}

export interface SchedulerDeps {
  clock: Clock;
  logger: SchedulerLogger;
  /** Starts the run. Not awaited one by one: a slow or failing fire never delays other schedules. */
  fire(schedule: Schedule, tickMs: number): Promise<void>;
  store?: ScheduleState;
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

interface FlowState {
  approved: boolean;
  entries: Entry[];
}

interface Entry extends HeapItem {
  schedule: Schedule;
  /** null when the crontab or zone does not parse (validation should have caught it): never fires. */
  spec: CronSpec | null;
  lastRunAt: number | undefined;
  flow: FlowState;
  /** Set once the trigger or its flow is gone, so an in-flight batch does not re-arm it. */
  removed: boolean;
}

const maxDefined = (a: number | undefined, b: number | undefined): number | undefined =>
  a === undefined ? b : b === undefined ? a : Math.max(a, b);

export function createScheduler(deps: SchedulerDeps): Scheduler {
  const { clock, logger, fire } = deps;
  const store = deps.store ?? createMemoryScheduleState();
  const specs = createSpecCache();
  const flows = new Map<string, FlowState>();
  const heap = new TickHeap<Entry>();
  /** Last fires as known to the store; null until start() has loaded it. */
  let persisted: Map<string, number> | null = null;
  let running = false;
  let starting: Promise<void> | null = null;
  /** Bumped by stop(), so a start() whose load finishes after a stop() does nothing. */
  let generation = 0;
  let timer: TimerHandle | undefined;
  let timerFor = Number.NaN;

  function acquireSpec(crontab: string, timezone: string, ctx: object): CronSpec | null {
    try {
      return specs.acquire(crontab, timezone);
    } catch (err) {
      logger.error({ ...ctx, crontab, timezone, err }, "cron trigger cannot be scheduled");
      return null;
    }
  }

  /**
   * Put the entry in the heap at its next tick, or take it out. With `catchUp`, the next tick is
   * the first one after lastRunAt, possibly already past (it then fires at once, coalesced);
   * otherwise the first one after now. Both are after lastRunAt, never at or before it.
   */
  function arm(entry: Entry, now: number, catchUp: boolean): void {
    if (!running || !entry.flow.approved || entry.spec === null) {
      heap.delete(entry);
      return;
    }
    const last = entry.lastRunAt;
    const base =
      catchUp && last !== undefined ? last : Math.max(now, last ?? Number.NEGATIVE_INFINITY);
    const next = nextTick(entry.spec, base);
    if (next === null) heap.delete(entry);
    else heap.set(entry, next);
  }

  function drop(entry: Entry): void {
    entry.removed = true;
    heap.delete(entry);
    if (entry.spec) specs.release(entry.spec);
  }

  function reschedule(): void {
    const top = heap.peek();
    if (!running || top === undefined) {
      clearTimer();
      return;
    }
    if (timer !== undefined && timerFor === top.due) return;
    clearTimer();
    const delay = Math.min(Math.max(top.due - clock.now(), 0), MAX_TIMER_DELAY_MS);
    timerFor = top.due;
    timer = clock.setTimeout(onTimer, delay);
    // The HTTP server keeps the process alive; a pending cron tick alone should not.
    timer.unref?.();
  }

  function clearTimer(): void {
    if (timer !== undefined) clock.clearTimeout(timer);
    timer = undefined;
    timerFor = Number.NaN;
  }

  function onTimer(): void {
    timer = undefined;
    timerFor = Number.NaN;
    if (!running) return;
    const now = clock.now();
    // Fire everything due first and re-arm afterwards: the last of 10,000 fires then waits only
    // for the other fires, not for 10,000 next-tick computations (~50 µs each when specs differ).
    const batch: Entry[] = [];
    for (let entry = heap.popDue(now); entry !== undefined; entry = heap.popDue(now)) {
      fireDue(entry, now);
      batch.push(entry);
    }
    for (const entry of batch) {
      // A fire may have redeployed, deactivated or removed the flow; arm() or drop() then decided.
      // Re-arm from the fired tick (lastRunAt), not from now: if this loop ran past the next tick,
      // that tick is due at once and fires (coalesced) instead of being skipped silently.
      if (!entry.removed && !heap.has(entry)) arm(entry, now, true);
    }
    reschedule();
  }

  /** The tick to fire for a due entry: its due tick, or the latest of several missed ones. */
  function tickToFire(entry: Entry, spec: CronSpec, now: number): number {
    const due = entry.due;
    // Ticks are whole seconds, so at least 1 s apart: woken within 1 s of the due tick, no later
    // tick can have passed yet, and the hot path needs no croner call.
    if (now - due < 1000) return due;
    const following = nextTick(spec, due);
    if (following === null || following > now) return due;
    // Several ticks passed while we were not running: fire only the latest of them.
    const latest = previousTick(spec, now + 1);
    return latest !== null && latest > due ? latest : due;
  }

  function fireDue(entry: Entry, now: number): void {
    const spec = entry.spec;
    if (spec === null) return;
    const tick = tickToFire(entry, spec, now);
    if (entry.lastRunAt !== undefined && tick <= entry.lastRunAt) return; // defensive: never repeat
    entry.lastRunAt = tick;
    persisted?.set(entry.schedule.scheduleId, tick);
    const ctx = {
      scheduleId: entry.schedule.scheduleId,
      elementId: entry.schedule.elementId,
      tick,
    };
    try {
      Promise.resolve(store.save(entry.schedule.scheduleId, tick)).catch((err: unknown) =>
        logger.error({ ...ctx, err }, "could not save schedule state"),
      );
    } catch (err) {
      logger.error({ ...ctx, err }, "could not save schedule state");
    }
    try {
      fire(entry.schedule, tick).catch((err: unknown) =>
        logger.error({ ...ctx, err }, "scheduled fire failed"),
      );
    } catch (err) {
      logger.error({ ...ctx, err }, "scheduled fire failed");
    }
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

  function schedulesOf(elementId: string): ScheduleOverview[] {
    const flow = flows.get(elementId);
    if (!flow) return [];
    const now = clock.now();
    return flow.entries.map((e) => overview(e, now));
  }

  return {
    upsertFlow(elementId, triggers, approved) {
      const now = clock.now();
      const prev = flows.get(elementId);
      const wasApproved = prev?.approved ?? false;
      const flow: FlowState = prev ?? { approved, entries: [] };
      flow.approved = approved;
      const old = new Map(flow.entries.map((e) => [e.schedule.name, e]));
      const entries: Entry[] = [];
      for (const t of triggers) {
        if (t.type !== "cron") continue;
        const timezone = t.timezone ?? DEFAULT_TIMEZONE;
        const scheduleId = scheduleIdFor(elementId, t.name);
        const schedule: Schedule = {
          scheduleId,
          elementId,
          name: t.name,
          crontab: t.crontab,
          timezone,
          parameter: t.parameter,
        };
        if (entries.some((e) => e.schedule.name === t.name)) {
          logger.warn({ elementId, name: t.name }, "duplicate cron trigger name ignored");
          continue;
        }
        const kept = old.get(t.name);
        if (kept) {
          old.delete(t.name);
          const specChanged =
            kept.schedule.crontab !== t.crontab || kept.schedule.timezone !== timezone;
          kept.schedule = schedule;
          if (specChanged) {
            if (kept.spec) specs.release(kept.spec);
            kept.spec = acquireSpec(t.crontab, timezone, { elementId, name: t.name });
          }
          // An unchanged, still-approved schedule keeps its place; anything else re-arms from now.
          if (specChanged || approved !== wasApproved) arm(kept, now, false);
          entries.push(kept);
          continue;
        }
        const entry: Entry = {
          due: Number.NaN,
          heapIndex: -1,
          schedule,
          spec: acquireSpec(t.crontab, timezone, { elementId, name: t.name }),
          lastRunAt: persisted?.get(scheduleId),
          flow,
          removed: false,
        };
        arm(entry, now, false);
        entries.push(entry);
      }
      for (const gone of old.values()) drop(gone);
      flow.entries = entries;
      flows.set(elementId, flow);
      reschedule();
    },

    removeFlow(elementId) {
      const flow = flows.get(elementId);
      if (!flow) return;
      for (const entry of flow.entries) drop(entry);
      flows.delete(elementId);
      reschedule();
    },

    schedules: schedulesOf,

    nextSchedule(elementId) {
      const all = schedulesOf(elementId);
      let best = all[0];
      for (const s of all) {
        if (
          s.nextRunAt !== undefined &&
          (best?.nextRunAt === undefined || s.nextRunAt < best.nextRunAt)
        )
          best = s;
      }
      return best;
    },

    start() {
      if (running) return Promise.resolve();
      if (starting) return starting;
      const gen = generation;
      starting = (async () => {
        let loaded: Map<string, number>;
        try {
          loaded = await store.load();
        } catch (err) {
          logger.error({ err }, "could not load schedule state; starting without catch-up");
          loaded = new Map();
        }
        if (gen !== generation) return;
        persisted ??= new Map();
        for (const [id, at] of loaded) persisted.set(id, maxDefined(persisted.get(id), at) ?? at);
        running = true;
        const now = clock.now();
        for (const flow of flows.values()) {
          for (const entry of flow.entries) {
            entry.lastRunAt = maxDefined(entry.lastRunAt, persisted.get(entry.schedule.scheduleId));
            arm(entry, now, true);
          }
        }
        reschedule();
      })().finally(() => {
        starting = null;
      });
      return starting;
    },

    stop() {
      generation++;
      running = false;
      clearTimer();
      for (const flow of flows.values()) for (const entry of flow.entries) heap.delete(entry);
    },
  };
}
