import fs from "node:fs";
import path from "node:path";
import fastifyStatic from "@fastify/static";
import type { FastifyInstance } from "fastify";
import type { Store } from "../store/types.ts";
import { consoleApi } from "./console-api.ts";

/** Where `npm run build:console` (Vite) writes the console; the service serves it as is. */
export const CONSOLE_DIST = path.resolve(import.meta.dirname, "../../console/dist");

/**
 * The console runs only its own bundled script and talks only to its own origin; it is never
 * framed (clickjacking on its one-click buttons). Tenants' strings are shown as text (console/src
 * has no HTML sink); this is the second line should one appear (docs/security.md).
 */
export const CONSOLE_CSP = [
  "default-src 'none'",
  "script-src 'self'",
  "style-src 'self'",
  "img-src 'self' data:",
  "connect-src 'self'",
  "object-src 'none'",
  "base-uri 'none'",
  "form-action 'none'",
  "frame-ancestors 'none'",
].join("; ");

/**
 * The web console at /console/. A static single-page app (hash routes, so no server-side
 * fallback) that calls the two services from the browser with the caller's headers or session
 * cookie: it has no privileges of its own. Hidden from the OpenAPI document.
 */
export async function consoleRoutes(
  app: FastifyInstance,
  opts: { store: Store; dataflowPrefix: string; dist?: string },
): Promise<void> {
  await app.register(consoleApi, { store: opts.store, dataflowPrefix: opts.dataflowPrefix });
  const dist = opts.dist ?? CONSOLE_DIST;
  if (!fs.existsSync(path.join(dist, "index.html"))) {
    app.get("/console", { schema: { hide: true } }, async (_req, reply) =>
      reply
        .code(503)
        .type("text/plain")
        .send("The console is not built: run `npm run build:console`.\n"),
    );
    return;
  }
  // The page itself, read once at start; no-cache so browsers pick up a new build after a restart.
  const index = fs.readFileSync(path.join(dist, "index.html"));
  app.get("/console", { schema: { hide: true } }, async (_req, reply) =>
    reply
      .type("text/html; charset=utf-8")
      .header("cache-control", "no-cache")
      .header("content-security-policy", CONSOLE_CSP)
      .send(index),
  );
  await app.register(fastifyStatic, {
    index: false,
    root: dist,
    // The router ignores trailing slashes: /console/ is the route above (assets use absolute URLs).
    prefix: "/console/",
    decorateReply: false,
    schemaHide: true,
    // Assets carry content hashes in their names; index.html must always be fresh.
    setHeaders(reply, file) {
      reply.header("content-security-policy", CONSOLE_CSP);
      reply.header(
        "cache-control",
        file.endsWith("index.html") ? "no-cache" : "public, max-age=31536000, immutable",
      );
    },
  });
}
