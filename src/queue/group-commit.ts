import type { NewRun, Store } from "../store/types.ts";
import type { RunJob } from "./types.ts";

type RunStore = Pick<Store, "insertRunsWith">;
interface Item {
  run: NewRun;
  job: RunJob;
}
interface Waiting extends Item {
  resolve(): void;
  reject(err: unknown): void;
}

/** At most this many runs per transaction. */
const MAX_BATCH = 200;

/**
 * Submits that arrive while a commit is under way go into the next transaction together
 * (docs/cluster.md, "Group commit"): on a busy API node each statement costs a round trip that
 * hands the CPU to PostgreSQL, so one transaction for many runs costs about what one did. An idle
 * node commits at once. A failed commit rejects every submit of its batch: none was accepted.
 */
export function createGroupCommit(commit: (store: RunStore, batch: Item[]) => Promise<void>): {
  add(store: RunStore, item: Item): Promise<void>;
} {
  const queues = new Map<RunStore, { waiting: Waiting[]; busy: boolean }>();

  async function drain(store: RunStore): Promise<void> {
    const q = queues.get(store);
    if (!q || q.busy) return;
    q.busy = true;
    try {
      while (q.waiting.length > 0) {
        const batch = q.waiting.splice(0, MAX_BATCH);
        try {
          await commit(
            store,
            batch.map(({ run, job }) => ({ run, job })),
          );
          for (const w of batch) w.resolve();
        } catch (err) {
          for (const w of batch) w.reject(err);
        }
      }
    } finally {
      q.busy = false;
      queues.delete(store);
    }
  }

  return {
    add(store, item) {
      return new Promise<void>((resolve, reject) => {
        let q = queues.get(store);
        if (!q) {
          q = { waiting: [], busy: false };
          queues.set(store, q);
        }
        q.waiting.push({ ...item, resolve, reject });
        void drain(store);
      });
    },
  };
}
