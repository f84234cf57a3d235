import type { FastifyInstance, FastifyRequest } from "fastify";
import fp from "fastify-plugin";
import { sessionFromCookieHeader } from "../auth/tokens.ts";
import { ErrorCode, SluiceError } from "../errors.ts";

/** Methods a cross-site page may send without a preflight that change nothing here. */
const SAFE = new Set(["GET", "HEAD", "OPTIONS"]);

const first = (v: string | string[] | undefined) => (Array.isArray(v) ? v[0] : v);

/**
 * Whether a request that carries the session cookie came from a page of another origin. The
 * browser sends the cookie by itself, `SameSite=Strict` included, to every request from the same
 * *site* (another port of the host, a sibling subdomain), and a body-less or `text/plain` POST
 * needs no preflight. `Sec-Fetch-Site` says where the request came from (every current browser
 * sends it); without it, `Origin`, compared with the host the request was sent to. A client that
 * sends neither is not a browser acting for a page.
 */
export function crossOrigin(req: FastifyRequest): boolean {
  const site = first(req.headers["sec-fetch-site"]);
  if (site !== undefined) return site !== "same-origin" && site !== "none";
  const origin = first(req.headers.origin);
  if (origin === undefined) return false;
  const host = first(req.headers["x-forwarded-host"]) ?? req.headers.host;
  try {
    return new URL(origin).host !== host;
  } catch {
    return true; // "null": a sandboxed frame, a file, a redirect across origins
  }
}

/**
 * Browser-facing protections for every answer of the service (docs/security.md, "The console and
 * browsers"): a state-changing request whose credential is the session cookie must come from the
 * service's own origin (the console), and no answer may be framed or sniffed into another type.
 */
export const browserGuard = fp(
  async (app: FastifyInstance) => {
    app.addHook("onRequest", async (req) => {
      if (SAFE.has(req.method) || req.headers.token !== undefined) return;
      if (sessionFromCookieHeader(first(req.headers.cookie)) === undefined) return;
      if (crossOrigin(req))
        throw new SluiceError(ErrorCode.FORBIDDEN, [
          "a request with the session cookie from a page of another origin",
        ]);
    });
    app.addHook("onSend", async (_req, reply, payload) => {
      if (!reply.hasHeader("x-content-type-options"))
        reply.header("x-content-type-options", "nosniff");
      if (!reply.hasHeader("x-frame-options")) reply.header("x-frame-options", "DENY");
      return payload;
    });
  },
  { name: "sluice-browser-guard" },
);
