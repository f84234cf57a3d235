import type { FastifyInstance } from "fastify";
import { badRequest } from "../errors.ts";

/**
 * No text Sluice keeps or looks up may hold U+0000: PostgreSQL refuses it in `text` and `jsonb`,
 * so in cluster mode a lookup or insert with one failed as an internal error (found by the fuzz
 * suite). Both modes refuse it up front with a 400 naming the field (docs/errors.md).
 */
export function installNulCheck(app: FastifyInstance): void {
  app.addHook("preValidation", async (req) => {
    const where =
      nulIn(req.params, "params") ?? nulIn(req.query, "querystring") ?? nulIn(req.body, "body");
    if (where) throw badRequest(`${where} must not contain the NUL character (U+0000)`);
  });
}

/** The path of the first string (value or key) holding U+0000, if any. */
function nulIn(value: unknown, path: string): string | undefined {
  if (typeof value === "string") return value.includes("\0") ? path : undefined;
  if (value === null || typeof value !== "object") return undefined;
  if (Array.isArray(value)) {
    for (let i = 0; i < value.length; i++) {
      const found = nulIn(value[i], `${path}[${i}]`);
      if (found) return found;
    }
    return undefined;
  }
  for (const [k, v] of Object.entries(value)) {
    if (k.includes("\0")) return `${path} (a key)`;
    const found = nulIn(v, `${path}.${k}`);
    if (found) return found;
  }
  return undefined;
}
