/**
 * Crontab + time zone → tick times (docs/flow-graph.md). Pure: croner is used only as a calculator
 * (`paused`, no callback), so the scheduler owns all timing and tests can fake the clock.
 */
import { createHash } from "node:crypto";
import { Cron } from "croner";

export const DEFAULT_TIMEZONE = "UTC";

export interface CronSpec {
  readonly crontab: string;
  readonly timezone: string;
  /** `crontab|timezone`: equal keys give equal ticks, so schedules may share one spec. */
  readonly key: string;
  readonly cron: Cron;
  /**
   * LIMIT_SCHEDULE_MIN_INTERVAL_S in ms (0: none): of the crontab's ticks only the first in each
   * window of this length, counted from the epoch, is a tick of the schedule (docs/scheduler.md,
   * "Apps share the scheduler").
   */
  readonly windowMs: number;
  /**
   * Memo of the last `nextTick` query. Many schedules with the same spec (10,000 × `* * * * *`)
   * ask for the tick after the same instant on every fire; one croner computation (~40 µs)
   * then serves them all.
   */
  memoAfter: number;
  memoNext: number | null;
}

export class CronSpecError extends Error {
  override name = "CronSpecError";
}

/** Fields joined by single spaces: `0  9 * * *` and `0 9 * * *` are the same schedule. */
function normalizeCrontab(crontab: string): string {
  return crontab.trim().split(/\s+/).join(" ");
}

function isValidTimeZone(zone: string): boolean {
  try {
    new Intl.DateTimeFormat("en-US", { timeZone: zone });
    return true;
  } catch {
    return false;
  }
}

/**
 * Parse a crontab of 5 fields, or 6 with seconds first, in an IANA zone (default UTC).
 * Throws CronSpecError with a readable message. Day-of-month and day-of-week combine with OR,
 * as in Vixie cron (croner's default).
 */
export function parseCronSpec(
  crontab: string,
  timezone: string = DEFAULT_TIMEZONE,
  windowMs = 0,
): CronSpec {
  const normalized = normalizeCrontab(crontab);
  const window = windowMs > 1000 ? windowMs : 0; // ticks are whole seconds: a second thins nothing
  const fields = normalized === "" ? 0 : normalized.split(" ").length;
  if (fields !== 5 && fields !== 6) {
    throw new CronSpecError(`crontab needs 5 fields, or 6 with seconds first; got ${fields}`);
  }
  if (!isValidTimeZone(timezone)) throw new CronSpecError(`unknown time zone: ${timezone}`);
  let cron: Cron;
  try {
    cron = new Cron(normalized, { paused: true, timezone, mode: "5-or-6-parts" });
  } catch (err) {
    throw new CronSpecError(err instanceof Error ? err.message : String(err));
  }
  shareYearTable(cron);
  return {
    crontab: normalized,
    timezone,
    key: specKey(normalized, timezone, window),
    cron,
    windowMs: window,
    memoAfter: Number.NaN,
    memoNext: null,
  };
}

/**
 * croner gives every pattern its own 10,000-entry year table (~80 KB), all ones for the `*` year
 * that 5- and 6-field crontabs always have; 10,000 distinct schedules would hold ~840 MB of
 * identical tables. Swap in one shared table with the same contents. croner only reads it, and
 * only when the year is not `*`; the guard leaves any other croner layout alone.
 */
const ALL_YEARS: readonly number[] = Object.freeze(new Array<number>(10_000).fill(1));

function shareYearTable(cron: Cron): void {
  const pattern = (
    cron as unknown as { _states?: { pattern?: { starYear?: unknown; year?: unknown } } }
  )._states?.pattern;
  if (pattern?.starYear !== true || !Array.isArray(pattern.year)) return;
  const year: unknown[] = pattern.year;
  if (year.length === ALL_YEARS.length && year.every((v) => v === 1)) pattern.year = ALL_YEARS;
}

/** The crontab/time zone error message, or null when valid. */
export function cronSpecError(crontab: string, timezone: string = DEFAULT_TIMEZONE): string | null {
  try {
    parseCronSpec(crontab, timezone);
    return null;
  } catch (err) {
    return err instanceof Error ? err.message : String(err);
  }
}

const specKey = (crontab: string, timezone: string, windowMs: number) =>
  `${crontab}|${timezone}|${windowMs}`;

function rawNext(spec: CronSpec, afterMs: number): number | null {
  const next = spec.cron.nextRun(new Date(afterMs));
  return next === null ? null : next.getTime();
}

function rawPrevious(spec: CronSpec, beforeMs: number): number | null {
  const prev = spec.cron.previousRuns(1, new Date(beforeMs))[0];
  return prev === undefined ? null : prev.getTime();
}

/** Where `t`'s window starts (epoch-aligned, so every node of a cluster agrees without state). */
const windowStart = (spec: CronSpec, t: number) => t - (t % spec.windowMs);

/** Whether the crontab's tick `t` is the first of its window, and so a tick of the schedule. */
function firstOfWindow(spec: CronSpec, t: number): boolean {
  const prev = rawPrevious(spec, t);
  return prev === null || prev < windowStart(spec, t);
}

/** First tick strictly after `afterMs` (epoch ms), or null when the pattern never fires again. */
export function nextTick(spec: CronSpec, afterMs: number): number | null {
  if (spec.memoAfter === afterMs) return spec.memoNext;
  let next = rawNext(spec, afterMs);
  // Not the first of its window: the first of a later window is (its previous is before it).
  if (next !== null && spec.windowMs > 0 && !firstOfWindow(spec, next))
    next = rawNext(spec, windowStart(spec, next) + spec.windowMs - 1);
  spec.memoAfter = afterMs;
  spec.memoNext = next;
  return next;
}

/** Last tick strictly before `beforeMs`, or null. Used only for catch-up after missed ticks. */
export function previousTick(spec: CronSpec, beforeMs: number): number | null {
  const prev = rawPrevious(spec, beforeMs);
  if (prev === null || spec.windowMs === 0 || firstOfWindow(spec, prev)) return prev;
  // The first tick of that window is before `prev`, so before `beforeMs` too.
  return rawNext(spec, windowStart(spec, prev) - 1);
}

/**
 * Stable id of a flow's cron trigger: derived from the element and the trigger name only, so a
 * redeploy that changes the crontab keeps it (docs/flow-graph.md), and no table is needed to look it up.
 * 20 lowercase base-36 characters, the same shape as run ids.
 */
export function scheduleIdFor(elementId: string, triggerName: string): string {
  const digest = createHash("sha256").update(elementId).update("\0").update(triggerName).digest();
  const alphabet = "0123456789abcdefghijklmnopqrstuvwxyz";
  let id = "";
  for (let i = 0; i < 20; i++) id += alphabet[(digest[i] ?? 0) % 36];
  return id;
}

/**
 * Shares one CronSpec per `crontab|timezone` so that the nextTick memo works across schedules.
 * Bounded by the number of distinct specs deployed; entries are dropped when unused.
 */
export function createSpecCache(windowMs = 0): {
  acquire(crontab: string, timezone: string): CronSpec;
  release(spec: CronSpec): void;
} {
  const specs = new Map<string, { spec: CronSpec; refs: number }>();
  return {
    acquire(crontab, timezone) {
      const hit = specs.get(
        specKey(normalizeCrontab(crontab), timezone, windowMs > 1000 ? windowMs : 0),
      );
      if (hit) {
        hit.refs++;
        return hit.spec;
      }
      const spec = parseCronSpec(crontab, timezone, windowMs);
      specs.set(spec.key, { spec, refs: 1 });
      return spec;
    },
    release(spec) {
      const hit = specs.get(spec.key);
      if (!hit || hit.spec !== spec) return;
      if (--hit.refs <= 0) specs.delete(spec.key);
    },
  };
}
