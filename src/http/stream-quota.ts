import { ErrorCode, SluiceError } from "../errors.ts";
import type { ScopeFilter } from "../store/model.ts";

/**
 * Open event streams per tenant (LIMIT_LIVE_STREAMS, docs/live-progress.md): each holds a socket
 * and up to a queue of frames, so their number is what bounds a tenant's share of the service.
 */
export interface StreamQuota {
  /** A place for one more stream of `scope`, or a 429; the function given back frees it. */
  take(scope: ScopeFilter): () => void;
}

export function createStreamQuota(limit: number): StreamQuota {
  const open = new Map<string, number>();
  return {
    take(scope) {
      // Unscoped callers (auth off, no headers) share one count.
      const key = scope ? JSON.stringify([scope.app, scope.space]) : "";
      const n = open.get(key) ?? 0;
      if (n >= limit)
        throw new SluiceError(ErrorCode.TOO_MANY, [
          `${n} open event streams in this space (LIMIT_LIVE_STREAMS)`,
        ]);
      open.set(key, n + 1);
      let freed = false;
      return () => {
        if (freed) return;
        freed = true;
        const left = (open.get(key) ?? 1) - 1;
        if (left > 0) open.set(key, left);
        else open.delete(key);
      };
    },
  };
}
