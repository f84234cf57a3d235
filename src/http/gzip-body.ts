import { createGunzip, createInflate } from "node:zlib";
import type { FastifyInstance } from "fastify";
import { badRequest } from "../errors.ts";

/**
 * `Content-Encoding: gzip|deflate` is accepted on every endpoint (docs/errors.md). The inflated
 * stream goes to the parser, whose body limit then counts inflated bytes (so a bomb is a 413).
 */
export function installBodyDecoding(app: FastifyInstance): void {
  app.addHook("preParsing", async (req, _reply, payload) => {
    const encoding = req.headers["content-encoding"]?.toLowerCase();
    if (!encoding || encoding === "identity") return payload;
    if (encoding !== "gzip" && encoding !== "deflate")
      throw badRequest(`unsupported content-encoding "${encoding}"`);
    // Without a content-type the body is refused unread (error-handler.ts); its length must stay,
    // or Fastify takes a request with neither for one with no body, and the route ran with none.
    if (!req.headers["content-type"]) return payload;
    const inflate = encoding === "gzip" ? createGunzip() : createInflate();
    const counted = inflate as typeof inflate & { receivedEncodedLength: number };
    counted.receivedEncodedLength = 0;
    payload.on("data", (chunk: Buffer) => {
      counted.receivedEncodedLength += chunk.length;
    });
    payload.on("error", (err) => inflate.destroy(err));
    // The parser reports a decoding error while it reads, then stops listening (after a 413, or
    // once the body is parsed); the request keeps feeding the inflater, and an error in a later
    // chunk or at the final flush (a truncated or corrupt tail) must not go unheard: an 'error'
    // with no listener ends the process (docs/errors.md, "bad input").
    inflate.on("error", (err) => req.log.debug({ err }, "request body decoding failed"));
    delete req.headers["content-length"];
    return payload.pipe(inflate);
  });
}
