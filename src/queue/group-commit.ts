import { createBatcher } from "../store/batch.ts";
import type { NewRun, Store } from "../store/types.ts";
import { isUniqueViolation } from "../store/unique-violation.ts";
import type { RunJob } from "./types.ts";

type RunStore = Pick<Store, "insertRunsWith">;
interface Item {
  run: NewRun;
  job: RunJob;
}

/** At most this many runs per transaction. */
const MAX_BATCH = 200;

/**
 * Submits that arrive in one turn of the event loop, or while a commit is under way, go into one
 * transaction together (docs/cluster.md, "Group commit"): on a busy API node each statement costs
 * a round trip that hands the CPU to PostgreSQL, so one transaction for many runs costs about what
 * one did. The batching is the store's own (src/store/batch.ts). A failed commit rejects every
 * submit of its batch: none was accepted. Except a taken run ID (a custom error handler's run ID
 * is derived, docs/error-handlers.md, "Durable"): the statement refused, nothing committed, so
 * each submit is committed again alone, and only the one whose ID is taken fails.
 */
export function createGroupCommit(commit: (store: RunStore, batch: Item[]) => Promise<void>): {
  add(store: RunStore, item: Item): Promise<void>;
} {
  const batchers = new Map<RunStore, (item: Item) => Promise<void>>();
  return {
    add(store, item) {
      let batcher = batchers.get(store);
      if (!batcher) {
        batcher = createBatcher<Item, void>({
          max: MAX_BATCH,
          run: async (items) => {
            await commit(store, items);
            return items.map(() => undefined);
          },
          alone: async (item, _answered, failure) => {
            if (!isUniqueViolation(failure)) throw failure;
            await commit(store, [item]);
          },
        });
        batchers.set(store, batcher);
      }
      return batcher(item);
    },
  };
}
