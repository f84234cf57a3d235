import { randomBytes } from "node:crypto";
import pg from "pg";
import type { RunEvents } from "./run-events.ts";

export interface PgNotifyLogger {
  info(obj: unknown, msg?: string): void;
  warn(obj: unknown, msg?: string): void;
  error(obj: unknown, msg?: string): void;
}

export interface PgNotifyOptions {
  connectionString: string;
  events: RunEvents;
  logger: PgNotifyLogger;
  /** Tests use their own channel; production nodes must all share the default. */
  channel?: string;
  /** The channel of flow changes; by default `sluice_flow_change`, or `<channel>_flow`. */
  flowChannel?: string;
  /** How often the listening connection is checked (a dead TCP peer may never say so). */
  heartbeatMs?: number;
}

export interface PgNotifyBridge {
  /** Tags this process's notifications so it can ignore its own. */
  readonly nodeId: string;
  /** Tells the other nodes that this flow changed (deploy, activate, deactivate: its schedules). */
  publishFlowChange(elementId: string): void;
  /**
   * Calls `fn` with the ID of each flow another node changed, and with null after the listener
   * reconnected (changes made meanwhile are unknown: re-read them all).
   */
  onFlowChange(fn: (elementId: string | null) => void): void;
  close(): Promise<void>;
}

export const RUN_END_CHANNEL = "sluice_run_end";
export const FLOW_CHANGE_CHANNEL = "sluice_flow_change";
/** PostgreSQL's payload limit is 8000 bytes; stay well under it. */
const MAX_PAYLOAD = 7000;
/** Ends remembered while the database is unreachable; beyond this the oldest are dropped. */
const MAX_PENDING = 50_000;

/**
 * Carries run ends between nodes: every local `events.onEnd(runId)` is published on the
 * `sluice_run_end` channel, and every notification from another node calls `events.notify`, so a
 * request waiting on API node A wakes when a worker on node B ends the run.
 *
 * Payload: `<nodeId>:<runId>[,<runId>…]`. Ends are batched per event-loop turn (one statement,
 * one notification per ≤7000 bytes), because at a thousand runs a second one NOTIFY per run would
 * be a thousand statements a second.
 */
export async function createPgNotifyBridge(opts: PgNotifyOptions): Promise<PgNotifyBridge> {
  const { events, logger } = opts;
  const channel = opts.channel ?? RUN_END_CHANNEL;
  const flowChannel =
    opts.flowChannel ?? (opts.channel ? `${opts.channel}_flow` : FLOW_CHANGE_CHANNEL);
  for (const c of [channel, flowChannel])
    if (!/^[a-z_][a-z0-9_]*$/.test(c)) throw new Error(`invalid channel name ${c}`);
  const flowListeners: ((elementId: string | null) => void)[] = [];
  const flowChanged = (elementId: string | null) => {
    for (const fn of flowListeners) {
      try {
        fn(elementId);
      } catch (err) {
        logger.error({ err, elementId }, "a flow change listener failed");
      }
    }
  };
  const nodeId = randomBytes(6).toString("hex");
  const heartbeatMs = opts.heartbeatMs ?? 10_000;
  let closed = false;

  // --- publishing ----------------------------------------------------------------------------
  // A pool of one: it replaces a broken connection by itself on the next query.
  const pub = new pg.Pool({
    connectionString: opts.connectionString,
    max: 1,
    application_name: "sluice-run-events-pub",
  });
  pub.on("error", (err) => logger.warn({ err }, "run-events publisher connection lost"));
  let pending: string[] = [];
  let flushing: Promise<void> | null = null;
  let retryTimer: NodeJS.Timeout | null = null;
  /** The runId being relayed from the channel: its local onEnd must not go back out. */
  let relaying: string | null = null;

  function payloads(ids: string[]): string[] {
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

  function flush(): Promise<void> {
    flushing ??= (async () => {
      try {
        while (pending.length > 0) {
          const batch = pending;
          pending = [];
          try {
            await pub.query("SELECT pg_notify($1, p) FROM unnest($2::text[]) AS p", [
              channel,
              payloads(batch),
            ]);
          } catch (err) {
            // Keep them for the next attempt: a waiter elsewhere would otherwise sit out its
            // whole timeout.
            pending = [...batch, ...pending].slice(-MAX_PENDING);
            logger.warn({ err, pending: pending.length }, "publishing run ends failed; retrying");
            if (!closed && !retryTimer) {
              retryTimer = setTimeout(() => {
                retryTimer = null;
                void flush();
              }, 1000);
              retryTimer.unref();
            }
            return;
          }
        }
      } finally {
        flushing = null;
      }
    })();
    return flushing;
  }

  events.onEnd((runId) => {
    if (closed || runId === relaying) return;
    pending.push(runId);
    if (pending.length === 1) setImmediate(() => void flush());
  });

  // --- listening -----------------------------------------------------------------------------
  let listener: pg.Client | null = null;
  let reconnectTimer: NodeJS.Timeout | null = null;
  let backoff = 100;

  function onNotification(msg: pg.Notification): void {
    if (!msg.payload) return;
    const colon = msg.payload.indexOf(":");
    if (colon < 0 || msg.payload.slice(0, colon) === nodeId) return;
    if (msg.channel === flowChannel) {
      flowChanged(msg.payload.slice(colon + 1));
      return;
    }
    if (msg.channel !== channel) return;
    for (const runId of msg.payload.slice(colon + 1).split(",")) {
      if (!runId) continue;
      relaying = runId;
      try {
        events.notify(runId);
      } finally {
        relaying = null;
      }
    }
  }

  async function connect(): Promise<void> {
    const client = new pg.Client({
      connectionString: opts.connectionString,
      application_name: "sluice-run-events",
      keepAlive: true,
    });
    client.on("notification", onNotification);
    client.on("error", (err) => lost(client, err));
    client.on("end", () => lost(client, new Error("connection ended")));
    await client.connect();
    await client.query(`LISTEN ${channel}; LISTEN ${flowChannel}`);
    if (closed) {
      await client.end().catch(() => {});
      return;
    }
    listener = client;
    backoff = 100;
  }

  function lost(client: pg.Client, err: unknown): void {
    if (closed || listener !== client) return;
    listener = null;
    client.removeAllListeners("notification");
    client.end().catch(() => {});
    // Ends published while we were away are gone; their waiters fall back to their timeouts.
    logger.warn({ err }, "run-events listener lost its connection; reconnecting");
    scheduleReconnect();
  }

  function scheduleReconnect(): void {
    if (closed || reconnectTimer) return;
    reconnectTimer = setTimeout(() => {
      reconnectTimer = null;
      connect().then(
        () => {
          logger.info({ nodeId }, "run-events listener reconnected");
          flowChanged(null);
        },
        (err: unknown) => {
          logger.warn({ err }, "run-events listener reconnect failed");
          backoff = Math.min(backoff * 2, 5000);
          scheduleReconnect();
        },
      );
    }, backoff);
    reconnectTimer.unref();
  }

  // A half-open TCP connection never errors by itself; a query that does not come back does.
  const heartbeat = setInterval(() => {
    const client = listener;
    if (!client) return;
    let answered = false;
    const deadline = setTimeout(
      () => {
        if (!answered) lost(client, new Error("heartbeat timed out"));
      },
      Math.min(5000, heartbeatMs),
    );
    deadline.unref();
    client.query("SELECT 1").then(
      () => {
        answered = true;
        clearTimeout(deadline);
      },
      (err: unknown) => {
        answered = true;
        clearTimeout(deadline);
        lost(client, err);
      },
    );
  }, heartbeatMs);
  heartbeat.unref();

  try {
    await connect();
  } catch (err) {
    closed = true;
    clearInterval(heartbeat);
    await pub.end().catch(() => {});
    throw err;
  }

  return {
    nodeId,
    publishFlowChange(elementId) {
      if (closed) return;
      // Not retried: a node that misses it still re-reads every flow each SCHEDULE_SYNC_MS.
      pub
        .query("SELECT pg_notify($1, $2)", [flowChannel, `${nodeId}:${elementId}`])
        .catch((err: unknown) =>
          logger.warn({ err, elementId }, "publishing a flow change failed"),
        );
    },
    onFlowChange(fn) {
      flowListeners.push(fn);
    },
    async close() {
      if (closed) return;
      // Ends already reported locally still go out.
      await flush();
      closed = true;
      clearInterval(heartbeat);
      if (reconnectTimer) clearTimeout(reconnectTimer);
      if (retryTimer) clearTimeout(retryTimer);
      const client = listener;
      listener = null;
      await client?.end().catch(() => {});
      await pub.end().catch(() => {});
    },
  };
}
