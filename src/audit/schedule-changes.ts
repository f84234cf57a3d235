import { type Locator, locateElement } from "../elements/locator.ts";
import type { FlowSchedules } from "../scheduler/flow-schedules.ts";
import type { Scope, Store } from "../store/types.ts";

/** Which flow actions may change a flow's schedules (docs/scheduler.md: cron lives in configure). */
export const SCHEDULE_ACTIONS = new Set([
  "deploy",
  "activate",
  "deactivate",
  "batch-deploy",
  "batch-deactivate",
]);

export interface ScheduleDeps {
  store: Store;
  schedules: Pick<FlowSchedules, "schedules" | "settled">;
}

/** Element name → its live schedules as `name crontab timezone` lines. */
export type ScheduleSnapshot = Map<string, string[]>;

/**
 * The live schedules of the flows a request names, before or after it. A flow whose locator does
 * not resolve (it does not exist yet, another scope's) has none.
 */
export async function snapshotSchedules(
  deps: ScheduleDeps,
  scope: Scope,
  body: unknown,
): Promise<ScheduleSnapshot> {
  const locators = (Array.isArray(body) ? body : [body]).slice(0, 100) as Locator[];
  const out: ScheduleSnapshot = new Map();
  for (const loc of locators) {
    if (typeof loc !== "object" || loc === null) continue;
    const el = await locateElement(deps.store, scope, loc, "DPL").catch(() => null);
    if (!el) continue;
    const live = deps.schedules
      .schedules(el.id)
      .filter((s) => s.nextRunAt !== undefined)
      .map((s) => `${s.name} ${s.crontab} ${s.timezone}`);
    out.set(el.name, live);
  }
  return out;
}

/** The flows whose live schedules differ between the two snapshots, with both lists. */
export function scheduleChanges(
  before: ScheduleSnapshot,
  after: ScheduleSnapshot,
): { elementName: string; before: string[]; after: string[] }[] {
  const names = new Set([...before.keys(), ...after.keys()]);
  const changes = [];
  for (const elementName of names) {
    const b = before.get(elementName) ?? [];
    const a = after.get(elementName) ?? [];
    if (b.join("\n") !== a.join("\n")) changes.push({ elementName, before: b, after: a });
  }
  return changes;
}
