import { randomBytes } from "node:crypto";
import pg from "pg";
import type { Clock, TimerHandle } from "../clock.ts";
import type { ProgressHub, ProgressRelay } from "./hub.ts";
import type { NodeState, ProgressEvent, ProgressSnapshot } from "./types.ts";

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
  for (const raw of nodes) {
    const n = fittedNode(raw);
    if (!n) continue; // its ID alone is too long to cross: watchers elsewhere go without it
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
    // Alone in a payload it fits (fitted): move it to a fresh one, also past the snapshot's nodes.
    if (size(cur) > MAX_PAYLOAD && (cur.e.length > 1 || (cur.s?.nodes.length ?? 0) > 0)) {
      cur.e.pop();
      next();
      cur.e.push(fit);
    }
  }
  next();
  return out;
}

/** Most one event or node state may take, leaving room for the message around it. */
const MAX_ONE = MAX_PAYLOAD - 400;
/** A node state fits in less: an event carries it with its kind and number around it. */
const fits = (x: unknown, room = MAX_ONE) => Buffer.byteLength(JSON.stringify(x)) <= room;
const CUT_NOTE = "\n[cut for the cluster relay]\n";

/** `text` halved until `ok` holds for it with the note (or nothing is left), noted when cut. */
function cut(text: string, ok: (t: string) => boolean): string {
  if (ok(text)) return text;
  let t = text;
  while (t.length > 0 && !ok(`${t}${CUT_NOTE}`)) t = t.slice(0, Math.floor(t.length / 2));
  return `${t}${CUT_NOTE}`;
}

/**
 * An event too large for one payload: an output's text or a node's error keeps its start; one
 * still too large (a node ID that long) crosses as a gap of one event.
 */
function fitted(e: ProgressEvent): ProgressEvent {
  if (fits(e)) return e;
  if (e.kind === "output") {
    const out = { ...e, text: cut(e.text, (text) => fits({ ...e, text })) };
    if (fits(out)) return out;
  }
  if (e.kind === "node") {
    const node = fittedNode(e.node);
    if (node && fits({ ...e, node })) return { ...e, node };
  }
  return { kind: "gap", seq: e.seq, dropped: 1 };
}

/** A node state with its error cut to fit a payload; undefined when even that does not fit. */
function fittedNode(n: NodeState): NodeState | undefined {
  const room = MAX_ONE - 200;
  if (fits(n, room)) return n;
  if (n.error === undefined) return undefined;
  const out = { ...n, error: cut(n.error, (error) => fits({ ...n, error }, room)) };
  return fits(out, room) ? out : undefined;
}
