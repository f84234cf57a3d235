import type { Store } from "../store/types.ts";

interface Claim {
  scheduleId: string;
  tick: number;
  settle: (won: boolean | Error) => void;
}

/**
 * Tick claims (docs/scheduler.md, "Exactly once across a cluster"). The scheduler fires everything
 * due in one synchronous loop; those claims go to the database together on the next macrotask
 * (one insert per 500), instead of 10,000 racing single inserts. Answers whether this node won.
 */
export function createTickClaims(
  store: Pick<Store, "claimScheduleTicks">,
): (scheduleId: string, tick: number) => Promise<boolean> {
  let batch: Claim[] = [];
  const flush = () => {
    const items = batch;
    batch = [];
    store.claimScheduleTicks(items).then(
      (won) => {
        for (const c of items) c.settle(won.has(`${c.scheduleId}@${c.tick}`));
      },
      (err: unknown) => {
        const e = err instanceof Error ? err : new Error(String(err));
        for (const c of items) c.settle(e);
      },
    );
  };
  return (scheduleId, tick) =>
    new Promise((resolve, reject) => {
      if (batch.length === 0) setImmediate(flush);
      batch.push({
        scheduleId,
        tick,
        settle: (won) => (won instanceof Error ? reject(won) : resolve(won)),
      });
    });
}
