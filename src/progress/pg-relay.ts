import { randomBytes } from "node:crypto";
import pg from "pg";
import type { Clock, TimerHandle } from "../clock.ts";
import type { ProgressHub, ProgressRelay } from "./hub.ts";
import type { ProgressEvent, ProgressSnapshot } from "./types.ts";

/**
 * Live progress between nodes over PostgreSQL NOTIFY (docs/live-progress.md, "In a cluster"). An
 * API node whose client watches a run it does not execute sends `want` on the channel every few
 * seconds; the node executing the run answers with its state, then relays its events for ten
 * seconds after each `want`. Nobody watching costs no notifications.
 *
 * Payload: `<process tag>:<json>`, `{"w":runId}` or `{"r":runId,"s":snapshot|null,"e":[events]}`,
 * under PostgreSQL's 8000-byte limit: batched per event-loop turn, split, output trimmed to fit.
 */
export const PROGRESS_CHANNEL = "sluice_run_progress";
const MAX_PAYLOAD = 7000;

interface Logger {
  warn(obj: unknown, msg?: string): void;
}

export type RelayMessage =
  | { w: string }
  | { r: string; s: ProgressSnapshot | null; e: ProgressEvent[] };
type Message = RelayMessage;

export interface PgProgressRelay {
  close(): Promise<void>;
}

export async function startPgProgressRelay(opts: {
  connectionString: string;
  hub: ProgressHub;
  logger: Logger;
  clock: Clock;
  channel?: string;
}): Promise<PgProgressRelay> {
  const channel = opts.channel ?? PROGRESS_CHANNEL;
  // Tags this process's payloads (it ignores its own); no colon, unlike a node's ID.
  const tag = randomBytes(6).toString("hex");
  if (!/^[a-z_][a-z0-9_]*$/.test(channel)) throw new Error(`invalid channel name ${channel}`);
  const pub = new pg.Pool({ connectionString: opts.connectionString, max: 1 });
  pub.on("error", (err) => opts.logger.warn({ err }, "progress relay publisher lost"));
  let pending: Message[] = [];
  let closed = false;
  let listener: pg.Client | undefined;
  let retry: TimerHandle | undefined;

  const flush = () => {
    const batch = relayPayloads(tag, pending);
    pending = [];
    if (closed || batch.length === 0) return;
    // Not retried: live progress is best effort; the record is the truth at the end.
    pub
      .query("SELECT pg_notify($1, p) FROM unnest($2::text[]) AS p", [channel, batch])
      .catch((err: unknown) => opts.logger.warn({ err }, "publishing run progress failed"));
  };
  const queue = (m: Message) => {
    pending.push(m);
    if (pending.length === 1) setImmediate(flush);
  };
  const relay: ProgressRelay = {
    want: (runId) => queue({ w: runId }),
    send: (runId, s, e) => {
      const last = pending.at(-1);
      if (last && "r" in last && last.r === runId && !s) last.e.push(...e);
      else queue({ r: runId, s, e });
    },
  };

  const onMessage = (payload: string | undefined) => {
    if (!payload) return;
    const colon = payload.indexOf(":");
    if (colon < 0 || payload.slice(0, colon) === tag) return;
    let m: Message;
    try {
      m = JSON.parse(payload.slice(colon + 1)) as Message;
    } catch {
      return;
    }
    if ("w" in m) opts.hub.wanted(m.w);
    else opts.hub.accept(m.r, m.s, m.e);
  };

  const connect = async () => {
    const client = new pg.Client({
      connectionString: opts.connectionString,
      application_name: "sluice-run-progress",
      keepAlive: true,
    });
    client.on("notification", (msg) => onMessage(msg.payload));
    const lost = (err: unknown) => {
      if (closed || listener !== client) return;
      listener = undefined;
      client.end().catch(() => {});
      opts.logger.warn({ err }, "progress relay listener lost; reconnecting");
      retry = opts.clock.setTimeout(() => void connect().catch(lost), 1000);
    };
    client.on("error", lost);
    client.on("end", () => lost(new Error("connection ended")));
    await client.connect();
    await client.query(`LISTEN ${channel}`);
    listener = client;
  };
  await connect();
  opts.hub.setRelay(relay);

  return {
    async close() {
      closed = true;
      if (retry) opts.clock.clearTimeout(retry);
      const l = listener;
      listener = undefined;
      await l?.end().catch(() => {});
      await pub.end().catch(() => {});
    },
  };
}

/** The payloads that carry `messages`, each tagged `<tag>:` (one message may take several). */
export function relayPayloads(tag: string, messages: readonly Message[]): string[] {
  return messages.flatMap(split).map((m) => `${tag}:${JSON.stringify(m)}`);
}

const size = (m: Message) => Buffer.byteLength(JSON.stringify(m)) + 20;

/** One message as payloads that fit: events spread over several, a long output text cut. */
function split(m: Message): Message[] {
  if ("w" in m || size(m) <= MAX_PAYLOAD) return [m];
  const out: Message[] = [];
  const nodes = m.s?.nodes ?? [];
  let cur: { r: string; s: ProgressSnapshot | null; e: ProgressEvent[] } = {
    r: m.r,
    s: m.s && { seq: m.s.seq, nodes: [] },
    e: [],
  };
  const next = () => {
    out.push(cur);
    cur = { r: m.r, s: m.s && { seq: m.s.seq, nodes: [] }, e: [] };
  };
  for (const n of nodes) {
    cur.s?.nodes.push(n);
    if (size(cur) > MAX_PAYLOAD) {
      cur.s?.nodes.pop();
      next();
      cur.s?.nodes.push(n);
    }
  }
  for (const e of m.e) {
    const fit = fitted(e);
    cur.e.push(fit);
    if (size(cur) > MAX_PAYLOAD && cur.e.length > 1) {
      cur.e.pop();
      next();
      cur.e.push(fit);
    }
  }
  next();
  return out;
}

/** An output event whose text alone would not fit a payload keeps its start. */
function fitted(e: ProgressEvent): ProgressEvent {
  if (e.kind !== "output") return e;
  let text = e.text;
  while (Buffer.byteLength(JSON.stringify({ ...e, text })) > MAX_PAYLOAD - 400)
    text = text.slice(0, Math.floor(text.length / 2));
  return text === e.text ? e : { ...e, text: `${text}\n[cut for the cluster relay]\n` };
}
