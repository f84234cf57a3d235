import { normalizeConfigure, type Trigger } from "../flows/graph.ts";
import { derivedId } from "../ids.ts";
import { ruleOf } from "../runs/retention-rules.ts";
import type { Scope, Store } from "../store/types.ts";
import { DEFAULT_TIMEZONE, nextTick, parseCronSpec, scheduleIdFor } from "./cron-spec.ts";
import type { Schedule, SchedulerLogger } from "./scheduler.ts";

/**
 * The ID of a tick's run, derived from the schedule and the tick (ids.ts): two processes starting
 * the same tick store one run, the second insert refused as a duplicate.
 */
export const tickRunId = (scheduleId: string, tick: number): string =>
  derivedId(tick, `schedule\n${scheduleId}\n${tick}`);

const DAY_MS = 86_400_000;

interface KnownFlow {
  scope: Scope;
  approved: boolean;
  triggers: readonly Trigger[];
}

/**
 * At start (docs/scheduler.md, "A tick claimed by a process that died"): a claim moves the
 * schedule's `lastRunAt`, so the catch-up never fires that tick again, and a process that died
 * after the claim and before the run was stored (a start waiting for room in a full queue, for
 * one) lost the tick. For each schedule whose last claimed tick is still its latest (its next tick
 * has not come: else the catch-up fires that one for the slot), a flow with no SCHEDULED run
 * created since the tick gets the tick's run now, under the tick's own ID (`tickRunId`). Not a tick
 * as old as the flow's run retention or older: its run may have been stored, ended and deleted, and
 * starting it again would repeat the job at whatever restart came next.
 */
export async function startUnstartedTicks(deps: {
  store: Pick<Store, "scheduledRunSince" | "loadScheduleState">;
  logger: SchedulerLogger;
  flows: ReadonlyMap<string, KnownFlow>;
  now: number;
  windowMs: number;
  /** Whole days the flow's runs are kept after their end (docs/retention.md); 0: for good. */
  keptDays: (elementId: string) => Promise<number>;
  /** Starts the tick's run (no claim: the tick is claimed already); not waited for. */
  start: (schedule: Schedule, tick: number) => Promise<void>;
}): Promise<void> {
  const failed = (err: unknown) => deps.logger.error({ err }, "scheduled fire failed");
  try {
    const lastRunAt = await deps.store.loadScheduleState();
    for (const [elementId, flow] of deps.flows) {
      if (!flow.approved) continue;
      for (const t of flow.triggers) {
        if (t.type !== "cron") continue;
        const scheduleId = scheduleIdFor(elementId, t.name);
        const tick = lastRunAt.get(scheduleId);
        if (tick === undefined) continue;
        const timezone = t.timezone ?? DEFAULT_TIMEZONE;
        const next = nextTick(parseCronSpec(t.crontab, timezone, deps.windowMs), tick);
        if (next !== null && next <= deps.now) continue;
        if (await deps.store.scheduledRunSince(flow.scope, elementId, tick)) continue;
        // No run since means none was stored only while retention cannot have deleted it.
        const days = await deps.keptDays(elementId);
        if (days > 0 && deps.now - tick >= days * DAY_MS) continue;
        const { name, crontab, parameter } = t;
        deps
          .start({ scheduleId, elementId, name, crontab, timezone, parameter }, tick)
          .catch(failed);
      }
    }
  } catch (err) {
    failed(err);
  }
}

/** Days a flow's runs are kept after their end, as retention reads it (retention-rules.ts). */
export async function flowKeptDays(
  store: Pick<Store, "flowRevision">,
  elementId: string,
  version: number | null | undefined,
  globalDays = 0,
): Promise<number> {
  const rev = version == null ? undefined : await store.flowRevision(elementId, version);
  const own = rev ? normalizeConfigure(rev.configure).retentionDays : undefined;
  return ruleOf(globalDays, { days: own, source: "configure" }).days;
}
