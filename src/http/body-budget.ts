import { Transform } from "node:stream";
import type { FastifyInstance, FastifyRequest } from "fastify";
import type { ByteBudget } from "../byte-budget.ts";

/** A body of at most this many bytes, with its length stated, takes nothing from the budget. */
const SMALL_BODY = 64 * 1024;
/** A body whose length is not known ahead (chunked, or inflated) is reserved in steps of this. */
const STEP = 64 * 1024;

interface Held {
  free: (() => void)[];
  reserved: number;
  /** The answer was sent or the connection closed: what was reserved is given back. */
  closed: boolean;
}

/**
 * Request bodies a node receives and handles at once, bounded per app and per node
 * (LIMIT_BODY_BYTES_IN_FLIGHT, docs/errors.md, "Bad input"): each is read whole and parsed, and
 * holds about four times its size until its answer; two hundred 8 MiB run parameters sent at
 * once took the process to 6.5 GB. A body past 64 KiB is reserved as it arrives, in steps (a
 * stated length only bounds it), so a client that sends slowly holds only what it sent. What was
 * reserved comes back when
 * the answer is sent or the connection closes. Multipart uploads (internal callers, their own
 * limits: docs/script-service.md) are read by their route and not counted.
 */
export function installBodyBudget(
  app: FastifyInstance,
  budget: ByteBudget,
  bodyLimit: number,
): void {
  app.addHook("preParsing", async (req, reply, payload) => {
    if (isMultipart(req)) return payload;
    // A small stated length bounds the body (Node's parser frames it), and a request that states
    // none and is not chunked has none. Any other body is reserved as it arrives, not by what it
    // states: a client that states 10 MiB and sends nothing would otherwise hold 10 MiB of the
    // budget, using none, until Node's request timeout. The body decoder (gzip-body.ts) drops the
    // length of a body it inflates, which is counted.
    const length = Number(req.headers["content-length"]);
    const unstated =
      req.headers["transfer-encoding"] !== undefined ||
      req.headers["content-encoding"] !== undefined;
    if (!(length > SMALL_BODY) && !unstated) return payload;
    // A client gone before the listener was there: its close was heard by nobody.
    const state: Held = { free: [], reserved: 0, closed: reply.raw.destroyed };
    reply.raw.once("close", () => {
      state.closed = true;
      for (const free of state.free.splice(0)) free();
    });
    let received = 0;
    const counted = new Transform({
      transform(chunk: Buffer, _encoding, done) {
        // Read after its answer (an inflater still emptying what it buffered once the parser
        // refused the body, or its client went): nothing is reserved that nobody would give back,
        // and the rest is not read.
        if (state.closed) {
          done(new Error("request body read after its answer"));
          return;
        }
        received += chunk.length;
        // Past the body limit the parser refuses the body (413): a request never reserves more
        // than an allowed body, so one alone always fits (docs/errors.md, "Bad input").
        const needed = Math.min(received, bodyLimit);
        if (needed > Math.max(state.reserved, SMALL_BODY)) {
          const step =
            Math.min(bodyLimit, Math.max(state.reserved + STEP, needed)) - state.reserved;
          try {
            state.free.push(budget.take(req.ctx.scope, step));
          } catch (err) {
            done(err as Error);
            return;
          }
          state.reserved += step;
        }
        done(null, chunk);
      },
    });
    payload.on("error", (err) => counted.destroy(err));
    // The parser stops listening once it has answered (a 413, a decoding error); an error that
    // comes later (the inflater's at the end of a truncated body) must still have a listener, or
    // it ends the process (docs/errors.md, "Bad input"; the fuzz suite found it).
    counted.on("error", (err) => req.log.debug({ err }, "request body counting ended"));
    return payload.pipe(counted);
  });
}

function isMultipart(req: FastifyRequest): boolean {
  return (req.headers["content-type"] ?? "").toLowerCase().startsWith("multipart/");
}
