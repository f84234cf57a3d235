import { LRUCache } from "lru-cache";
import type { Clock } from "./clock.ts";
import { ErrorCode, SluiceError } from "./errors.ts";
import type { Store } from "./store/types.ts";

/** An app's total read from the store is believed this long (docs/security.md, "What an app may store"). */
export const STORED_READ_MS = 1000;

export interface StoredQuota {
  /**
   * Refuses a write that would add to what the app stores (28010008) once the app stores
   * LIMIT_STORED_BYTES_PER_APP or more; else counts `adding` bytes (what the caller is about to
   * write, as far as it knows) towards the app until its next read. `what` names the write.
   */
  admit(app: string, adding: number, what: string): Promise<void>;
  /** Counts bytes a write here stored for the app (a run's end) until its next read. */
  charge(app: string, bytes: number): void;
  /** Reads the app again on its next admit: a delete here freed some of its bytes. */
  forget(app: string): void;
}

interface Known {
  /** The store's total at the read, and when it was read. */
  read: number;
  at: number;
  /** Bytes admitted here since. */
  since: number;
}

/**
 * LIMIT_STORED_BYTES_PER_APP (docs/security.md, "What an app may store"). The app's total is the
 * store's (every node's writes, counted in the writes' own statements: store/stored-bytes.ts),
 * read at most once per STORED_READ_MS per app and node (sooner once what this node counted since
 * takes half the room the read left, never sooner when the read found no room), plus what was admitted and ended here since. So the bound is
 * passed by at most what is in flight: the write that crosses it, the ends (results, output, node
 * logs) of runs accepted before, and what other nodes store within one read's age.
 * `limit` 0: no bound, nothing read.
 */
export function createStoredQuota(deps: {
  store: Pick<Store, "storedBytes">;
  clock: Clock;
  limit: number;
}): StoredQuota {
  const { store, clock, limit } = deps;
  const known = new LRUCache<string, Known>({ max: 10_000 });
  const reading = new Map<string, Promise<Known>>();
  const read = (app: string): Promise<Known> => {
    let p = reading.get(app);
    if (!p) {
      const at = clock.now();
      p = store
        .storedBytes(app)
        .then((bytes) => {
          const k = { read: bytes, at, since: 0 };
          known.set(app, k);
          return k;
        })
        .finally(() => reading.delete(app));
      reading.set(app, p);
    }
    return p;
  };
  return {
    async admit(app, adding, what) {
      if (limit <= 0) return;
      let k = known.get(app);
      // Read again when old, or once what was counted here since takes half the room the read
      // left. A read at the bound or past it refuses until it is old (or a delete here forgot
      // it): re-reading for each refusal made a tenant at its bound one database sum a request.
      const left = limit - (k?.read ?? 0);
      if (!k || clock.now() - k.at >= STORED_READ_MS || (left > 0 && k.since * 2 >= left))
        k = await read(app);
      const total = k.read + k.since;
      if (total >= limit)
        throw new SluiceError(ErrorCode.STORAGE_LIMIT, [app, String(total), String(limit), what]);
      k.since += adding;
    },
    charge(app, bytes) {
      const k = known.get(app);
      if (k) k.since += bytes;
    },
    forget(app) {
      known.delete(app);
    },
  };
}
