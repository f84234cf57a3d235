import type { FastifyInstance } from "fastify";
import type { ByteBudget } from "../byte-budget.ts";
import { ErrorCode, SluiceError } from "../errors.ts";
import { fail } from "./envelope.ts";

/** An answer of at most this many characters takes nothing from the budget. */
const SMALL_ANSWER = 64 * 1024;

/**
 * JSON answers a node has written and its clients have not read, bounded per app and per node
 * (LIMIT_ANSWER_BYTES_IN_FLIGHT, docs/errors.md, "Bad input"): what the kernel does not take stays
 * in the service's memory until the client reads it or goes, and sixty unread GETs of one run's
 * 13 MiB result took the process to 1.4 GB resident. An answer's size is reserved before it is
 * written; one that does not fit is answered instead with the 429 naming the setting. What was
 * reserved comes back when the answer is sent whole or the connection closes. Buffers (artifact
 * downloads, which have their own budget: docs/artifacts.md) are not counted.
 */
export function installAnswerBudget(app: FastifyInstance, budget: ByteBudget): void {
  app.addHook("onSend", async (req, reply, payload) => {
    if (typeof payload !== "string" || payload.length <= SMALL_ANSWER) return payload;
    let free: () => void;
    try {
      // UTF-16 length: a close enough measure of the bytes written.
      free = budget.take(req.ctx?.scope, payload.length);
    } catch (err) {
      if (!(err instanceof SluiceError)) throw err;
      reply.type("application/json");
      return JSON.stringify(fail(ErrorCode.TOO_MANY, err.message));
    }
    reply.raw.once("close", free);
    // A client gone before the listener was there: its close was heard by nobody.
    if (reply.raw.destroyed || req.raw.socket?.destroyed) free();
    return payload;
  });
}
