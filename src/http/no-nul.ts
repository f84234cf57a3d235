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

/**
 * The path of the first string (value or key) holding U+0000, if any. Runs on every request's
 * body: nothing is built on the way down, the path only on the way back up from a find.
 */
export function nulIn(value: unknown, path: string): string | undefined {
  const found = nulAt(value);
  if (found === undefined) return undefined;
  let where = path;
  for (let i = found.length - 1; i >= 0; i--) {
    const step = found[i];
    where += typeof step === "number" ? `[${step}]` : step === KEY ? " (a key)" : `.${step}`;
  }
  return where;
}

/** Marks a find in a key (the last step of a path). */
const KEY = Symbol("key");

/** The steps to the first U+0000, innermost first; undefined when there is none. */
function nulAt(value: unknown): (string | number | typeof KEY)[] | undefined {
  if (typeof value === "string") return value.includes("\0") ? [] : undefined;
  if (value === null || typeof value !== "object") return undefined;
  if (Array.isArray(value)) {
    for (let i = 0; i < value.length; i++) {
      const found = nulAt(value[i]);
      if (found) {
        found.push(i);
        return found;
      }
    }
    return undefined;
  }
  for (const k in value) {
    if (!Object.hasOwn(value, k)) continue;
    if (k.includes("\0")) return [KEY];
    const found = nulAt((value as Record<string, unknown>)[k]);
    if (found) {
      found.push(k);
      return found;
    }
  }
  return undefined;
}
