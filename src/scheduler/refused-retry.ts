import type { Clock } from "../clock.ts";
import { ErrorCode, SluiceError } from "../errors.ts";
import { type CronSpec, nextTick, parseCronSpec } from "./cron-spec.ts";
import type { Schedule, SchedulerLogger } from "./scheduler.ts";

const FIRST_DELAY_MS = 250;
const MAX_DELAY_MS = 5000;

/**
 * Starts the run of a claimed tick (docs/scheduler.md, "A full queue"). A start refused with 429
 * (the queue is full, or the node is stopping) is tried again, waiting 250 ms doubling to 5 s on
 * the injected clock, for as long as the tick's catch-up window lasts: until the schedule's next
 * tick, which then stands for the slot itself. `start` answers false when the run is no longer
 * wanted (the flow was deactivated meanwhile, the scheduler stopped).
 */
export async function startWithinWindow(
  deps: { clock: Clock; logger: SchedulerLogger; windowMs?: number },
  schedule: Schedule,
  tick: number,
  start: () => Promise<boolean>,
): Promise<void> {
  let spec: CronSpec | undefined;
  let delay = FIRST_DELAY_MS;
  for (;;) {
    try {
      await start();
      return;
    } catch (err) {
      if (!(err instanceof SluiceError) || err.code !== ErrorCode.TOO_MANY) throw err;
      spec ??= parseCronSpec(schedule.crontab, schedule.timezone, deps.windowMs);
      const windowEnd = nextTick(spec, tick) ?? tick;
      if (deps.clock.now() + delay >= windowEnd) throw err;
      deps.logger.warn(
        { scheduleId: schedule.scheduleId, tick, retryInMs: delay },
        "scheduled run refused (429); retrying within its tick",
      );
      await new Promise<void>((resolve) => deps.clock.setTimeout(resolve, delay));
      delay = Math.min(delay * 2, MAX_DELAY_MS);
    }
  }
}
