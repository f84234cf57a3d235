import type { IncomingMessage } from "node:http";
import type { Clock } from "../clock.ts";

export interface DiscardLimits {
  /** Bytes read and dropped at most before the answer goes out anyway. */
  maxBytes: number;
  /** Silence from the client after which the answer goes out anyway. */
  idleMs: number;
}

/**
 * Reads and drops what is left of a request body that will not be used (an error answer given
 * before the body was read, such as a 413), so that the answer can be read by every client.
 * Many clients (curl without `Expect`, Java's HttpURLConnection, .NET's HttpClient) write the
 * whole body before they read; closing the socket on unread data makes the kernel reset the
 * connection and the client sees EPIPE or ECONNRESET instead of the envelope (docs/errors.md).
 * Resolves when the body has ended, past `maxBytes`, after `idleMs` without data, or when the
 * connection goes away. Never rejects.
 */
export function discardUnreadBody(
  raw: IncomingMessage,
  limits: DiscardLimits,
  clock: Clock,
): Promise<void> {
  if (raw.complete || raw.readableEnded || raw.destroyed) return Promise.resolve();
  return new Promise((resolve) => {
    let dropped = 0;
    let timer = clock.setTimeout(finish, limits.idleMs);
    function finish() {
      clock.clearTimeout(timer);
      raw.off("data", onData);
      raw.off("end", finish);
      raw.off("close", finish);
      raw.off("error", finish);
      resolve();
    }
    function onData(chunk: Buffer) {
      dropped += chunk.length;
      if (dropped > limits.maxBytes) return finish();
      clock.clearTimeout(timer);
      timer = clock.setTimeout(finish, limits.idleMs);
    }
    // A decoder the body was piped into is no longer read; left piped, its full buffer would
    // pause the request and the drain would stall.
    raw.unpipe();
    raw.on("data", onData);
    raw.once("end", finish);
    raw.once("close", finish);
    raw.once("error", finish);
    raw.resume();
  });
}
