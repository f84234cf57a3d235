import type { FastifyInstance, FastifyReply, FastifyRequest } from "fastify";
import type { ByteBudget } from "../byte-budget.ts";
import { ErrorCode, languageOf, SluiceError } from "../errors.ts";
import { fail } from "./envelope.ts";

/** An answer of at most this many bytes takes nothing from the budget. */
const SMALL_ANSWER = 64 * 1024;
/** A UTF-16 unit is at most three bytes of UTF-8. */
const MAX_BYTES_PER_UNIT = 3;

/**
 * JSON answers a node has written and its clients have not read, bounded per app and per node
 * (LIMIT_ANSWER_BYTES_IN_FLIGHT, docs/errors.md, "Bad input"): what the kernel does not take stays
 * in the service's memory until the client reads it or goes, and sixty unread GETs of one run's
 * 13 MiB result took the process to 1.4 GB resident. An answer's size in bytes is reserved before
 * it is written; one that does not fit is answered instead with the 429 naming the setting, and,
 * when the request changed something (a run-sync's run ended), saying that it was carried out.
 * What was reserved comes back when the answer is sent whole or the connection closes. Buffers
 * (artifact downloads, which have their own budget: docs/artifacts.md) are not counted.
 * Installed after every other onSend hook (the audit trail's), which see the answer itself.
 */
export function installAnswerBudget(app: FastifyInstance, budget: ByteBudget): void {
  app.addHook("onSend", async (req, reply, payload) => {
    if (typeof payload !== "string" || payload.length * MAX_BYTES_PER_UNIT <= SMALL_ANSWER)
      return payload;
    // Bytes, not UTF-16 units: text outside ASCII takes up to three times its length.
    const bytes = Buffer.byteLength(payload);
    if (bytes <= SMALL_ANSWER) return payload;
    let free: () => void;
    try {
      free = budget.take(req.ctx?.scope, bytes);
    } catch (err) {
      if (!(err instanceof SluiceError)) throw err;
      reply.type("application/json");
      const refusal = new SluiceError(ErrorCode.TOO_MANY, [
        `${err.args[0] ?? ""}${carriedOut(req, reply)}`,
      ]);
      const language = req.ctx?.language ?? languageOf(req.headers.language);
      return JSON.stringify(fail(ErrorCode.TOO_MANY, refusal.messageIn(language)));
    }
    reply.raw.once("close", free);
    // A client gone before the listener was there: its close was heard by nobody.
    if (reply.raw.destroyed || req.raw.socket?.destroyed) free();
    return payload;
  });
}

/**
 * A refused answer of a request that changed something: a client that retried on the 429 would
 * run it again. The run or task it answers (its x-run-id, x-task-id) is named.
 */
function carriedOut(req: FastifyRequest, reply: FastifyReply): string {
  if (req.method === "GET" || req.method === "HEAD") return "";
  const id = reply.getHeader("x-run-id") ?? reply.getHeader("x-task-id");
  return typeof id === "string"
    ? `; the request itself was carried out: run ${id} ended, its result is read again by its ID`
    : "; the request itself was carried out, only its answer was not sent";
}
