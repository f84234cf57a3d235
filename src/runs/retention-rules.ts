/**
 * Which retention applies to an element's runs (docs/retention.md): its own (a flow's
 * `configure.retentionDays`, a Python element's `# sluice-retention-days`) when it has one,
 * otherwise RUN_RETENTION_DAYS. 0 days means kept for good, whoever says it.
 */

const DAY_MS = 86_400_000;

/** About a hundred years: a longer retention is a typo, not a policy. */
export const MAX_RETENTION_DAYS = 36_500;

export type RuleSource = "global" | "configure" | "declaration";

export interface RetentionRule {
  /** Whole days after its end a finished run is kept; 0: for good. */
  days: number;
  source: RuleSource;
}

export function ruleOf(
  globalDays: number,
  own: { days: number | undefined; source: Exclude<RuleSource, "global"> },
): RetentionRule {
  return own.days === undefined
    ? { days: globalDays, source: "global" }
    : { days: own.days, source: own.source };
}

/** Runs that ended before this instant (epoch ms) go; null: none go. */
export function cutoffOf(now: number, rule: RetentionRule): number | null {
  return rule.days > 0 ? now - rule.days * DAY_MS : null;
}
