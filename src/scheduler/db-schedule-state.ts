import type { Store } from "../store/types.ts";
import type { ScheduleState } from "./schedule-state.ts";

/**
 * `lastRunAt` in the database. `save` writes nothing: the fire claims its tick first
 * (`claimScheduleTick`), and that claim is the persisted `lastRunAt`, written by exactly one node.
 * Writing it again here would only race the claim.
 */
export function createDbScheduleState(store: Pick<Store, "loadScheduleState">): ScheduleState {
  return {
    load: () => store.loadScheduleState(),
    save() {},
  };
}
