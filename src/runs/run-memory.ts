import { type BudgetStats, createByteBudget } from "../byte-budget.ts";
import type { ScopeFilter } from "../store/model.ts";

/**
 * What executing runs hold in the service's memory, bounded per app (all its spaces together) and
 * per node (docs/run-limits.md, "Values in memory"): a run keeps its parameter and every node's
 * output until it ends, and a node may wait as long as its flow says. Eleven runs of an 8 MiB
 * parameter waiting at an http node exhausted a 256 MiB heap. A run reserves its parameter's JSON
 * size when it starts, and each value as it is made (a node's output, an http response as it is
 * read); one that does not fit is refused with a 429 naming the setting passed.
 */
export interface RunMemory {
  /** The reservations of one run; `free` gives back every one of them (once). */
  hold(scope: ScopeFilter): RunHold;
  stats(): BudgetStats;
}

export interface RunHold {
  /** Reserves `bytes`, or throws the 429; the function given back frees them early (once). */
  take(bytes: number): () => void;
  free(): void;
}

export function createRunMemory(limits: {
  runBytesInFlight: number;
  runBytesInFlightPerApp: number;
}): RunMemory {
  const budget = createByteBudget({
    total: limits.runBytesInFlight,
    perApp: limits.runBytesInFlightPerApp,
    what: "the values of executing runs",
    totalSetting: "LIMIT_RUN_BYTES_IN_FLIGHT",
    perAppSetting: "LIMIT_RUN_BYTES_IN_FLIGHT_PER_APP",
  });
  return {
    stats: () => budget.stats(),
    hold(scope) {
      const frees = new Set<() => void>();
      return {
        take(bytes) {
          if (bytes <= 0) return () => {};
          const free = budget.take(scope, bytes);
          frees.add(free);
          return () => {
            frees.delete(free);
            free();
          };
        },
        free() {
          for (const f of frees) f();
          frees.clear();
        },
      };
    },
  };
}

/** No bound: every reservation is granted (a lifecycle built without one). */
export const UNBOUNDED_RUN_MEMORY: RunMemory = {
  hold: () => ({ take: () => () => {}, free: () => {} }),
  stats: () => ({ held: 0, refused: 0 }),
};
