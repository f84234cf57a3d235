import { randomBytes } from "node:crypto";
import pg from "pg";
import { type Clock, systemClock, type TimerHandle } from "../clock.ts";
import { createPublisher, flush, type Publishing, publishFlowChange } from "./pg-notify-publish.ts";
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
  /**
   * The channel on which queues announce committed jobs (src/queue/pg-queue.ts); absent: not
   * listened to. Heard through `onJobs`.
   */
  jobsChannel?: string;
  /** Tags this process's notifications (the queue tags its announcements the same way). */
  nodeId?: string;
  /** How often the listening connection is checked (a dead TCP peer may never say so). */
  heartbeatMs?: number;
  /** The retry, reconnect and heartbeat timers; the system clock when a test builds one alone. */
  clock?: Clock;
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
  /**
   * Calls `fn` with the queue name of each other node's announcement of committed jobs, and with
   * null after the listener reconnected (announcements made meanwhile are unknown).
   */
  onJobs(fn: (queueName: string | null) => void): void;
  close(): Promise<void>;
}

export const RUN_END_CHANNEL = "sluice_run_end";
export const FLOW_CHANGE_CHANNEL = "sluice_flow_change";

/** The state one bridge keeps: its channels, its two connections and the ends to publish. */
interface Bridge extends Publishing {
  opts: PgNotifyOptions;
  events: RunEvents;
  logger: PgNotifyLogger;
  flowListeners: ((elementId: string | null) => void)[];
  jobsListeners: ((queueName: string | null) => void)[];
  /** Every channel its listening connection listens on (checked names). */
  listens: string[];
  /** The runId being relayed from the channel: its local onEnd must not go back out. */
  relaying: string | null;
  listener: pg.Client | null;
  reconnectTimer: TimerHandle | null;
  backoff: number;
  heartbeat: TimerHandle | null;
}

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
  const channel = opts.channel ?? RUN_END_CHANNEL;
  const flowChannel =
    opts.flowChannel ?? (opts.channel ? `${opts.channel}_flow` : FLOW_CHANGE_CHANNEL);
  const channels = [channel, flowChannel, ...(opts.jobsChannel ? [opts.jobsChannel] : [])];
  for (const c of channels)
    if (!/^[a-z_][a-z0-9_]*$/.test(c)) throw new Error(`invalid channel name ${c}`);
  const b: Bridge = {
    opts,
    events: opts.events,
    logger: opts.logger,
    clock: opts.clock ?? systemClock,
    nodeId: opts.nodeId ?? randomBytes(6).toString("hex"),
    channel,
    flowChannel,
    flowListeners: [],
    jobsListeners: [],
    listens: channels,
    closed: false,
    pub: createPublisher(opts.connectionString, opts.logger),
    pending: [],
    flushing: null,
    retryTimer: null,
    relaying: null,
    listener: null,
    reconnectTimer: null,
    backoff: 100,
    heartbeat: null,
  };
  b.events.onEnd((runId) => {
    if (b.closed || runId === b.relaying) return;
    b.pending.push(runId);
    if (b.pending.length === 1) setImmediate(() => void flush(b));
  });
  armHeartbeat(b, opts.heartbeatMs ?? 10_000);
  try {
    await connect(b);
  } catch (err) {
    b.closed = true;
    stopTimers(b);
    await b.pub.end().catch(() => {});
    throw err;
  }
  return {
    nodeId: b.nodeId,
    publishFlowChange: (elementId) => publishFlowChange(b, elementId),
    onFlowChange(fn) {
      b.flowListeners.push(fn);
    },
    onJobs(fn) {
      b.jobsListeners.push(fn);
    },
    close: () => close(b),
  };
}

function tell<T>(b: Bridge, listeners: ((v: T) => void)[], value: T, what: string): void {
  for (const fn of listeners) {
    try {
      fn(value);
    } catch (err) {
      b.logger.error({ err, value }, `a ${what} listener failed`);
    }
  }
}

const flowChanged = (b: Bridge, elementId: string | null) =>
  tell(b, b.flowListeners, elementId, "flow change");

// --- listening -------------------------------------------------------------------------------

function onNotification(b: Bridge, msg: pg.Notification): void {
  if (!msg.payload) return;
  const colon = msg.payload.indexOf(":");
  if (colon < 0 || msg.payload.slice(0, colon) === b.nodeId) return;
  if (msg.channel === b.opts.jobsChannel) {
    tell(b, b.jobsListeners, msg.payload.slice(colon + 1), "jobs");
    return;
  }
  if (msg.channel === b.flowChannel) {
    flowChanged(b, msg.payload.slice(colon + 1));
    return;
  }
  if (msg.channel !== b.channel) return;
  for (const runId of msg.payload.slice(colon + 1).split(",")) {
    if (!runId) continue;
    b.relaying = runId;
    try {
      b.events.notify(runId);
    } finally {
      b.relaying = null;
    }
  }
}

async function connect(b: Bridge): Promise<void> {
  const client = new pg.Client({
    connectionString: b.opts.connectionString,
    application_name: "sluice-run-events",
    keepAlive: true,
  });
  client.on("notification", (msg) => onNotification(b, msg));
  client.on("error", (err) => lost(b, client, err));
  client.on("end", () => lost(b, client, new Error("connection ended")));
  await client.connect();
  await client.query(b.listens.map((c) => `LISTEN ${c}`).join("; "));
  if (b.closed) {
    await client.end().catch(() => {});
    return;
  }
  b.listener = client;
  b.backoff = 100;
}

function lost(b: Bridge, client: pg.Client, err: unknown): void {
  if (b.closed || b.listener !== client) return;
  b.listener = null;
  client.removeAllListeners("notification");
  client.end().catch(() => {});
  // Ends published while we were away are gone; their waiters fall back to their timeouts.
  b.logger.warn({ err }, "run-events listener lost its connection; reconnecting");
  scheduleReconnect(b);
}

function scheduleReconnect(b: Bridge): void {
  if (b.closed || b.reconnectTimer) return;
  b.reconnectTimer = b.clock.setTimeout(() => {
    b.reconnectTimer = null;
    connect(b).then(
      () => {
        b.logger.info({ nodeId: b.nodeId }, "run-events listener reconnected");
        flowChanged(b, null);
        tell(b, b.jobsListeners, null, "jobs");
      },
      (err: unknown) => {
        b.logger.warn({ err }, "run-events listener reconnect failed");
        b.backoff = Math.min(b.backoff * 2, 5000);
        scheduleReconnect(b);
      },
    );
  }, b.backoff);
  b.reconnectTimer.unref?.();
}

/** Every `heartbeatMs`, whether or not the last beat has answered. */
function armHeartbeat(b: Bridge, heartbeatMs: number): void {
  b.heartbeat = b.clock.setTimeout(() => {
    if (b.closed) return;
    armHeartbeat(b, heartbeatMs);
    beat(b, heartbeatMs);
  }, heartbeatMs);
  b.heartbeat.unref?.();
}

/** A half-open TCP connection never errors by itself; a query that does not come back does. */
function beat(b: Bridge, heartbeatMs: number): void {
  const client = b.listener;
  if (!client) return;
  let answered = false;
  const deadline = b.clock.setTimeout(
    () => {
      if (!answered) lost(b, client, new Error("heartbeat timed out"));
    },
    Math.min(5000, heartbeatMs),
  );
  deadline.unref?.();
  client.query("SELECT 1").then(
    () => {
      answered = true;
      b.clock.clearTimeout(deadline);
    },
    (err: unknown) => {
      answered = true;
      b.clock.clearTimeout(deadline);
      lost(b, client, err);
    },
  );
}

function stopTimers(b: Bridge): void {
  for (const t of [b.heartbeat, b.reconnectTimer, b.retryTimer]) if (t) b.clock.clearTimeout(t);
}

async function close(b: Bridge): Promise<void> {
  if (b.closed) return;
  // Ends already reported locally still go out.
  await flush(b);
  b.closed = true;
  stopTimers(b);
  const client = b.listener;
  b.listener = null;
  await client?.end().catch(() => {});
  await b.pub.end().catch(() => {});
}
