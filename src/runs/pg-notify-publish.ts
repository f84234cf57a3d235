import pg from "pg";
import type { Clock, TimerHandle } from "../clock.ts";

/**
 * The publishing half of the run-events bridge (pg-notify.ts): run ends batched per event-loop
 * turn into as few NOTIFY payloads as fit, kept and retried while the database is unreachable.
 */

/** PostgreSQL's payload limit is 8000 bytes; stay well under it. */
const MAX_PAYLOAD = 7000;
/** Ends remembered while the database is unreachable; beyond this the oldest are dropped. */
const MAX_PENDING = 50_000;

/** What publishing reads and keeps of a bridge's state; the bridge's own state extends it. */
export interface Publishing {
  logger: { warn(obj: unknown, msg?: string): void };
  clock: Clock;
  /** Tags every payload, so that the publishing node ignores its own notifications. */
  nodeId: string;
  channel: string;
  flowChannel: string;
  closed: boolean;
  /** A pool of one: it replaces a broken connection by itself on the next query. */
  pub: pg.Pool;
  pending: string[];
  flushing: Promise<void> | null;
  retryTimer: TimerHandle | null;
}

export function createPublisher(connectionString: string, logger: Publishing["logger"]): pg.Pool {
  const pub = new pg.Pool({
    connectionString,
    max: 1,
    application_name: "sluice-run-events-pub",
  });
  pub.on("error", (err) => logger.warn({ err }, "run-events publisher connection lost"));
  // Broken while in use: the query fails, and the client's own report must not end the process.
  pub.on("connect", (client) =>
    client.on("error", (err) => logger.warn({ err }, "run-events publisher connection lost")),
  );
  return pub;
}

function payloads(nodeId: string, ids: string[]): string[] {
  const out: string[] = [];
  let cur = "";
  for (const id of ids) {
    if (cur && cur.length + id.length + 1 > MAX_PAYLOAD) {
      out.push(`${nodeId}:${cur}`);
      cur = "";
    }
    cur = cur ? `${cur},${id}` : id;
  }
  if (cur) out.push(`${nodeId}:${cur}`);
  return out;
}

export function flush(b: Publishing): Promise<void> {
  b.flushing ??= (async () => {
    try {
      while (b.pending.length > 0) {
        const batch = b.pending;
        b.pending = [];
        try {
          await b.pub.query("SELECT pg_notify($1, p) FROM unnest($2::text[]) AS p", [
            b.channel,
            payloads(b.nodeId, batch),
          ]);
        } catch (err) {
          // Keep them for the next attempt: a waiter elsewhere would otherwise sit out its
          // whole timeout.
          b.pending = [...batch, ...b.pending].slice(-MAX_PENDING);
          b.logger.warn({ err, pending: b.pending.length }, "publishing run ends failed; retrying");
          scheduleRetry(b);
          return;
        }
      }
    } finally {
      b.flushing = null;
    }
  })();
  return b.flushing;
}

function scheduleRetry(b: Publishing): void {
  if (b.closed || b.retryTimer) return;
  b.retryTimer = b.clock.setTimeout(() => {
    b.retryTimer = null;
    void flush(b);
  }, 1000);
  b.retryTimer.unref?.();
}

export function publishFlowChange(b: Publishing, elementId: string): void {
  if (b.closed) return;
  // Not retried: a node that misses it still re-reads every flow each SCHEDULE_SYNC_MS.
  b.pub
    .query("SELECT pg_notify($1, $2)", [b.flowChannel, `${b.nodeId}:${elementId}`])
    .catch((err: unknown) => b.logger.warn({ err, elementId }, "publishing a flow change failed"));
}
