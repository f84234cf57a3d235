import { createGunzip, createInflate } from "node:zlib";
import type { FastifyInstance } from "fastify";
import { badRequest } from "../errors.ts";

/**
 * `Content-Encoding: gzip|deflate` is accepted on every endpoint (contract §10). The inflated
 * stream goes to the parser, whose body limit then counts inflated bytes (so a bomb is a 413).
 */
export function installBodyDecoding(app: FastifyInstance): void {
  app.addHook("preParsing", async (req, _reply, payload) => {
    const encoding = req.headers["content-encoding"]?.toLowerCase();
    if (!encoding || encoding === "identity") return payload;
    if (encoding !== "gzip" && encoding !== "deflate")
      throw badRequest(`unsupported content-encoding "${encoding}"`);
    const inflate = encoding === "gzip" ? createGunzip() : createInflate();
    const counted = inflate as typeof inflate & { receivedEncodedLength: number };
    counted.receivedEncodedLength = 0;
    payload.on("data", (chunk: Buffer) => {
      counted.receivedEncodedLength += chunk.length;
    });
    payload.on("error", (err) => inflate.destroy(err));
    delete req.headers["content-length"];
    return payload.pipe(inflate);
  });
}
