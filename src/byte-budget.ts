import { ErrorCode, SluiceError } from "./errors.ts";
import type { ScopeFilter } from "./store/model.ts";

/**
 * Bytes a node holds in memory for requests under way, bounded per app (all its spaces together)
 * and per node: artifact downloads (docs/artifacts.md, "Downloads") and request bodies
 * (docs/errors.md, "Bad input"). Reserved before they are read; a 429 names the setting passed.
 */
export interface ByteBudget {
  /** Reserves `bytes` for `scope`, or a 429; the function given back frees them (once). */
  take(scope: ScopeFilter, bytes: number): () => void;
  /** Bytes held now, and the reservations refused so far (the `sluice_budget_*` metrics). */
  stats(): BudgetStats;
}

export interface BudgetStats {
  held: number;
  refused: number;
}

export interface ByteBudgetLimits {
  total: number;
  perApp: number;
  /** What holds the bytes, and the settings named in a refusal. */
  what: string;
  totalSetting: string;
  perAppSetting: string;
}

export function createByteBudget(limits: ByteBudgetLimits): ByteBudget {
  const perApp = new Map<string, number>();
  let total = 0;
  let refused = 0;
  const refuse = (text: string) => {
    refused += 1;
    return new SluiceError(ErrorCode.TOO_MANY, [text]);
  };
  return {
    stats: () => ({ held: total, refused }),
    take(scope, bytes) {
      // Unscoped callers (auth off, no headers) share one count.
      const app = scope ? scope.app : "";
      const mine = perApp.get(app) ?? 0;
      if (mine + bytes > limits.perApp)
        throw refuse(
          `${limits.what} of this app hold ${mine} bytes on this node; ${bytes} more would pass ${limits.perAppSetting} (${limits.perApp})`,
        );
      if (total + bytes > limits.total)
        throw refuse(
          `${limits.what} hold ${total} bytes on this node; ${bytes} more would pass ${limits.totalSetting} (${limits.total})`,
        );
      perApp.set(app, mine + bytes);
      total += bytes;
      let freed = false;
      return () => {
        if (freed) return;
        freed = true;
        const left = (perApp.get(app) ?? bytes) - bytes;
        if (left > 0) perApp.set(app, left);
        else perApp.delete(app);
        total -= bytes;
      };
    },
  };
}
