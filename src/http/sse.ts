import type { ServerResponse } from "node:http";
import type { Clock, TimerHandle } from "../clock.ts";
import { PROGRESS_LIMITS } from "../progress/types.ts";

/** One Server-Sent Events message: `id` is the run's event number when it has one. */
export interface SseMessage {
  event: string;
  data: unknown;
  id?: number | undefined;
}

export interface SseStream {
  send(m: SseMessage): void;
  /** Sends what is queued, then ends the response. */
  end(): void;
  readonly closed: boolean;
}

const frame = (m: SseMessage): string =>
  `${m.id !== undefined ? `id: ${m.id}\n` : ""}event: ${m.event}\ndata: ${JSON.stringify(m.data)}\n\n`;

/** An event stream's headers (a HEAD of one gets them too). */
export const SSE_HEADERS = {
  "content-type": "text/event-stream; charset=utf-8",
  "cache-control": "no-store",
  "x-accel-buffering": "no",
} as const;

/** What one client that does not read may hold queued, in characters of its frames. */
export const CLIENT_QUEUE_BYTES = 256 * 1024;

/**
 * An event stream over a hijacked response (docs/live-progress.md). A client that does not read
 * never makes it buffer without bound: while the socket is full, messages wait in a queue of
 * `clientQueue` messages and CLIENT_QUEUE_BYTES; past either the oldest go, and a `gap` message says how many. A comment line every
 * `heartbeatMs` keeps proxies from closing an idle stream and finds a dead peer.
 */
export function openSse(
  res: ServerResponse,
  deps: { clock: Clock; heartbeatMs: number; onClose: () => void },
): SseStream {
  const { clock } = deps;
  // The client went while the route was still reading (the run): its 'close' has come and gone,
  // so no listener below would hear it and free what the stream holds (a tenant's place, the
  // heartbeat). Told on the next microtask: the caller holds the stream by then.
  if (res.destroyed) {
    queueMicrotask(deps.onClose);
    return { send() {}, end() {}, closed: true };
  }
  // keep-alive, unless the client asked to close (docs/live-progress.md): without the header a
  // stop of the service with streams open waited about 70 s (cluster mode); forced for every
  // client, one that sent `Connection: close` kept its socket after the stream ended.
  const closing = /\bclose\b/i.test(res.req.headers.connection ?? "");
  res.writeHead(200, closing ? SSE_HEADERS : { ...SSE_HEADERS, connection: "keep-alive" });
  res.flushHeaders();
  // Frames, not messages: the budget is in bytes too (an event of control characters escapes
  // to six times its size), so a stuck client holds at most CLIENT_QUEUE_BYTES.
  let queue: string[] = [];
  let queuedBytes = 0;
  let dropped = 0;
  let blocked = false;
  let closed = false;
  let ending = false;
  let beat: TimerHandle | undefined;

  const close = () => {
    if (closed) return;
    closed = true;
    if (beat) clock.clearTimeout(beat);
    queue = [];
    queuedBytes = 0;
    deps.onClose();
  };
  res.on("close", close);
  res.on("error", close);

  const write = (text: string) => {
    if (!res.write(text)) blocked = true;
  };
  const drain = () => {
    blocked = false;
    if (dropped > 0) {
      write(frame({ event: "gap", data: { dropped } }));
      dropped = 0;
    }
    while (!blocked && queue.length > 0) {
      const next = queue.shift() as string;
      queuedBytes -= next.length;
      write(next);
    }
    if (!blocked && ending) res.end();
  };
  res.on("drain", drain);
  const heartbeat = () => {
    beat = clock.setTimeout(() => {
      if (closed) return;
      if (!blocked) write(": heartbeat\n\n");
      heartbeat();
    }, deps.heartbeatMs);
  };
  heartbeat();

  return {
    send(m) {
      if (closed || ending) return;
      if (!blocked) return write(frame(m));
      const text = frame(m);
      queue.push(text);
      queuedBytes += text.length;
      while (
        queue.length > 1 &&
        (queue.length > PROGRESS_LIMITS.clientQueue || queuedBytes > CLIENT_QUEUE_BYTES)
      ) {
        queuedBytes -= (queue.shift() as string).length;
        dropped++;
      }
    },
    end() {
      if (closed || ending) return;
      ending = true;
      if (!blocked) res.end();
    },
    get closed() {
      return closed;
    },
  };
}
