import type { FastifyRequest } from "fastify";
import { ErrorCode, SluiceError } from "../errors.ts";
import type { ScopeFilter } from "../store/model.ts";

/**
 * Requests that wait (docs/live-progress.md, "Bounds"): event streams, `?timeout=` long polls
 * and a keyed run-sync's retry. Each holds a socket and some memory while it waits, so their
 * number is what bounds a tenant's share of a node: per app and space for event streams
 * (LIMIT_LIVE_STREAMS), per app over all its spaces (LIMIT_HELD_REQUESTS_PER_APP: an app names
 * as many spaces as it likes) and per node (LIMIT_HELD_REQUESTS), streams and waits together.
 */
export interface HeldQuota {
  /** A place for one more waiting request of `scope`, or a 429; the function given back frees it. */
  take(scope: ScopeFilter, kind: "stream" | "wait"): () => void;
  /** How many are held now, of each kind (the `sluice_held_requests` gauge). */
  held(): { stream: number; wait: number };
}

export interface HeldLimits {
  /** Open event streams per app and space. */
  liveStreams: number;
  heldRequestsPerApp: number;
  heldRequests: number;
}

function counter() {
  const open = new Map<string, number>();
  return {
    count: (key: string) => open.get(key) ?? 0,
    add(key: string) {
      open.set(key, (open.get(key) ?? 0) + 1);
    },
    remove(key: string) {
      const left = (open.get(key) ?? 1) - 1;
      if (left > 0) open.set(key, left);
      else open.delete(key);
    },
  };
}

const tooMany = (text: string) => new SluiceError(ErrorCode.TOO_MANY, [text]);

export function createHeldQuota(limits: HeldLimits): HeldQuota {
  const streams = counter();
  const apps = counter();
  const kinds = { stream: 0, wait: 0 };
  let total = 0;
  return {
    held: () => ({ ...kinds }),
    take(scope, kind) {
      // Unscoped callers (auth off, no headers) share one count.
      const space = scope ? JSON.stringify([scope.app, scope.space]) : "";
      const app = scope ? scope.app : "";
      const stream = kind === "stream";
      if (stream && streams.count(space) >= limits.liveStreams)
        throw tooMany(
          `${streams.count(space)} open event streams in this space (LIMIT_LIVE_STREAMS)`,
        );
      if (apps.count(app) >= limits.heldRequestsPerApp)
        throw tooMany(
          `${apps.count(app)} waiting requests of this app on this node (event streams and long polls; LIMIT_HELD_REQUESTS_PER_APP)`,
        );
      if (total >= limits.heldRequests)
        throw tooMany(
          `${total} waiting requests on this node (event streams and long polls; LIMIT_HELD_REQUESTS)`,
        );
      if (stream) streams.add(space);
      apps.add(app);
      kinds[kind]++;
      total++;
      let freed = false;
      return () => {
        if (freed) return;
        freed = true;
        if (stream) streams.remove(space);
        apps.remove(app);
        kinds[kind]--;
        total--;
      };
    },
  };
}

/**
 * Runs `wait` (a long poll, a retry's wait) in a place of the quota, with a signal that aborts
 * when the client goes: a wait nobody will read ends at once and gives its place back, instead
 * of keeping the request's memory for the rest of its timeout.
 */
export async function heldWait<T>(
  quota: HeldQuota,
  req: FastifyRequest,
  wait: (gone: AbortSignal) => Promise<T>,
): Promise<T> {
  const free = quota.take(req.ctx.scope, "wait");
  const gone = new AbortController();
  const socket = req.raw.socket;
  const onClose = () => gone.abort("client gone");
  socket.once("close", onClose);
  if (socket.destroyed) onClose();
  try {
    return await wait(gone.signal);
  } finally {
    socket.off("close", onClose);
    free();
  }
}
