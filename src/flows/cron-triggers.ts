/**
 * Which of a configure's triggers are cron triggers: one definition for the deploy validator's
 * bound per flow (MAX_CRON_TRIGGERS), the app's active schedules (LIMIT_SCHEDULES_PER_APP) and
 * the scheduler, so that what is bounded and counted is what gets scheduled (docs/scheduler.md).
 * Any shape is taken: the validator counts before it checks each trigger.
 */
export function isCronTrigger(t: unknown): t is { type: "cron" } {
  return typeof t === "object" && t !== null && (t as { type?: unknown }).type === "cron";
}

/** The cron triggers of a configure of any shape (none when `triggers` is not an array). */
export function cronCount(configure: unknown): number {
  const triggers = (configure as { triggers?: unknown } | null | undefined)?.triggers;
  return Array.isArray(triggers) ? triggers.filter(isCronTrigger).length : 0;
}
