/**
 * The scheduler's heap and its one timer (docs/scheduler.md): arming entries at their next tick,
 * the timer for the earliest one, and firing what is due. scheduler.ts keeps the public side.
 */
import type { Clock, TimerHandle } from "../clock.ts";
import { type CronSpec, type createSpecCache, nextTick, previousTick } from "./cron-spec.ts";
import type { ScheduleState } from "./schedule-state.ts";
import type { HeapItem, TickHeap } from "./tick-heap.ts";

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

export interface SchedulerLogger {
  warn(obj: unknown, msg?: string): void;
  error(obj: unknown, msg?: string): void;
}

export interface FlowState {
  approved: boolean;
  entries: Entry[];
}

export interface Entry extends HeapItem {
  schedule: Schedule;
  /** null when the crontab or zone does not parse (validation should have caught it): never fires. */
  spec: CronSpec | null;
  lastRunAt: number | undefined;
  flow: FlowState;
  /** Set once the trigger or its flow is gone, so an in-flight batch does not re-arm it. */
  removed: boolean;
}

/** The state one scheduler keeps: its dependencies, its flows, the heap and the timer. */
export interface SchedulerState {
  clock: Clock;
  logger: SchedulerLogger;
  fire(schedule: Schedule, tickMs: number): Promise<void>;
  store: ScheduleState;
  specs: ReturnType<typeof createSpecCache>;
  flows: Map<string, FlowState>;
  heap: TickHeap<Entry>;
  /** Last fires as known to the store; null until start() has loaded it. */
  persisted: Map<string, number> | null;
  running: boolean;
  starting: Promise<void> | null;
  /** Bumped by stop(), so a start() whose load finishes after a stop() does nothing. */
  generation: number;
  timer: TimerHandle | undefined;
  timerFor: number;
}

export function acquireSpec(
  s: SchedulerState,
  crontab: string,
  timezone: string,
  ctx: object,
): CronSpec | null {
  try {
    return s.specs.acquire(crontab, timezone);
  } catch (err) {
    s.logger.error({ ...ctx, crontab, timezone, err }, "cron trigger cannot be scheduled");
    return null;
  }
}

/**
 * Put the entry in the heap at its next tick, or take it out. With `catchUp`, the next tick is
 * the first one after lastRunAt, possibly already past (it then fires at once, coalesced);
 * otherwise the first one after now. Both are after lastRunAt, never at or before it.
 */
export function arm(s: SchedulerState, entry: Entry, now: number, catchUp: boolean): void {
  const { heap } = s;
  if (!s.running || !entry.flow.approved || entry.spec === null) {
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

export function drop(s: SchedulerState, entry: Entry): void {
  entry.removed = true;
  s.heap.delete(entry);
  if (entry.spec) s.specs.release(entry.spec);
}

export function reschedule(s: SchedulerState): void {
  const top = s.heap.peek();
  if (!s.running || top === undefined) {
    clearTimer(s);
    return;
  }
  if (s.timer !== undefined && s.timerFor === top.due) return;
  clearTimer(s);
  const delay = Math.min(Math.max(top.due - s.clock.now(), 0), MAX_TIMER_DELAY_MS);
  s.timerFor = top.due;
  s.timer = s.clock.setTimeout(() => onTimer(s), delay);
  // The HTTP server keeps the process alive; a pending cron tick alone should not.
  s.timer.unref?.();
}

export function clearTimer(s: SchedulerState): void {
  if (s.timer !== undefined) s.clock.clearTimeout(s.timer);
  s.timer = undefined;
  s.timerFor = Number.NaN;
}

function onTimer(s: SchedulerState): void {
  s.timer = undefined;
  s.timerFor = Number.NaN;
  if (!s.running) return;
  const now = s.clock.now();
  // Fire everything due first and re-arm afterwards: the last of 10,000 fires then waits only
  // for the other fires, not for 10,000 next-tick computations (~50 µs each when specs differ).
  const batch: Entry[] = [];
  for (let entry = s.heap.popDue(now); entry !== undefined; entry = s.heap.popDue(now)) {
    fireDue(s, entry, now);
    batch.push(entry);
  }
  for (const entry of batch) {
    // A fire may have redeployed, deactivated or removed the flow; arm() or drop() then decided.
    // Re-arm from the fired tick (lastRunAt), not from now: if this loop ran past the next tick,
    // that tick is due at once and fires (coalesced) instead of being skipped silently.
    if (!entry.removed && !s.heap.has(entry)) arm(s, entry, now, true);
  }
  reschedule(s);
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

function fireDue(s: SchedulerState, entry: Entry, now: number): void {
  const { logger } = s;
  const spec = entry.spec;
  if (spec === null) return;
  const tick = tickToFire(entry, spec, now);
  if (entry.lastRunAt !== undefined && tick <= entry.lastRunAt) return; // defensive: never repeat
  entry.lastRunAt = tick;
  s.persisted?.set(entry.schedule.scheduleId, tick);
  const ctx = {
    scheduleId: entry.schedule.scheduleId,
    elementId: entry.schedule.elementId,
    tick,
  };
  try {
    Promise.resolve(s.store.save(entry.schedule.scheduleId, tick)).catch((err: unknown) =>
      logger.error({ ...ctx, err }, "could not save schedule state"),
    );
  } catch (err) {
    logger.error({ ...ctx, err }, "could not save schedule state");
  }
  try {
    s.fire(entry.schedule, tick).catch((err: unknown) =>
      logger.error({ ...ctx, err }, "scheduled fire failed"),
    );
  } catch (err) {
    logger.error({ ...ctx, err }, "scheduled fire failed");
  }
}
