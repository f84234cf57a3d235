import { isUtf8 } from "node:buffer";
import type { FastifyInstance, FastifyRequest } from "fastify";
import fp from "fastify-plugin";
import {
  type Identity,
  readSessionCookie,
  sessionFromCookieHeader,
  verifyToken,
} from "../auth/tokens.ts";
import type { Config } from "../config.ts";
import { badRequest, ErrorCode, type Language, languageOf, SluiceError } from "../errors.ts";
import type { Scope } from "../store/types.ts";

/**
 * Who may call a route and where its scope comes from (docs/auth.md):
 * - `context`: app/space/user required (from headers or a valid session cookie).
 * - `contextEnv`: required in signature mode; optional in off mode (then lookups are unscoped).
 * - `list`: headers, else the session cookie; in off mode with neither, every scope (one alone: 400).
 * - `internal`: internal script endpoints; signature mode accepts only internal-secret tokens.
 * - `external`: external script endpoints; app tokens or the session cookie.
 * - `lookup`: script result lookups; app or internal tokens or the session cookie.
 */
export type Access = "context" | "contextEnv" | "list" | "internal" | "external" | "lookup";

export interface RequestContext {
  /** null only where the contract allows an unscoped lookup. */
  scope: Scope | null;
  user: string | null;
  language: Language;
}

declare module "fastify" {
  interface FastifyRequest {
    ctx: RequestContext;
  }
  interface FastifyContextConfig {
    access?: Access;
    /** Every body field has a default: no body is `{}`, not "body is required" (docs/errors.md). */
    bodyOptional?: boolean;
  }
}

const header = (req: FastifyRequest, name: string): string | undefined => {
  const v = req.headers[name];
  const s = Array.isArray(v) ? v[0] : v;
  return s === undefined || s === "" ? undefined : headerText(s);
};

/**
 * A header value's text (docs/auth.md, "Headers per endpoint"). Node reads header bytes as
 * Latin-1: a user "张三" sent as UTF-8 (Go's net/http, a gateway passing it through) became
 * "å¼ ä¸\x89", stored as the initiator, and its token, signed over the UTF-8 name, did not match.
 * Bytes that are UTF-8 are read as UTF-8; others (Python's requests writes a `str` header as
 * Latin-1) stay Latin-1.
 */
export function headerText(value: string): string {
  if (!NON_ASCII.test(value)) return value;
  const bytes = Buffer.from(value, "latin1");
  return isUtf8(bytes) ? bytes.toString("utf8") : value;
}
const NON_ASCII = /[\u0080-\uffff]/;

/** Headers that name who calls and where: each at most once (docs/auth.md, "Headers per endpoint"). */
const SINGLE = ["app", "space", "user", "token"] as const;

function unauthorized(): SluiceError {
  return new SluiceError(ErrorCode.UNAUTHORIZED);
}

export function resolveContext(
  config: Config,
  req: FastifyRequest,
  access: Access,
  nowS: number,
): RequestContext {
  const language = languageOf(req.headers.language);
  for (const name of SINGLE) {
    const n = req.raw.headersDistinct[name]?.length ?? 0;
    // Node joins the values ("a1, a2"): a scope neither sender meant.
    if (n > 1) throw badRequest(`header ${name} is given ${n} times; send it once`);
  }
  const app = header(req, "app");
  const space = header(req, "space");
  const user = header(req, "user");
  const token = header(req, "token");
  const auth = config.auth;
  const sessionValue = sessionFromCookieHeader(header(req, "cookie"));
  const cookie =
    sessionValue !== undefined && auth.sessionSecret
      ? readSessionCookie(auth.sessionSecret, sessionValue, nowS)
      : null;

  let identity: Partial<Identity> = { app, space, user };
  if (auth.mode === "signature") {
    if (token !== undefined) {
      if (!app || !space || user === undefined) throw unauthorized();
      const id = { app, space, user };
      const secrets: (string | undefined)[] = [];
      if (access === "internal" || access === "lookup") secrets.push(auth.internalSecret);
      // Own keys only: an app named "__proto__" or "constructor" must not reach Object.prototype.
      if (access !== "internal" && Object.hasOwn(auth.appSecrets, app))
        secrets.push(auth.appSecrets[app]);
      const ok = secrets.some(
        (s) => s !== undefined && verifyToken(s, token, id, nowS, auth.tokenTtlS),
      );
      if (!ok) throw unauthorized();
    } else if (sessionValue !== undefined && access !== "internal") {
      if (!cookie) throw unauthorized();
      if (
        (app && app !== cookie.app) ||
        (space && space !== cookie.space) ||
        (user && user !== cookie.user)
      ) {
        throw unauthorized();
      }
      identity = cookie;
    } else {
      throw unauthorized();
    }
  } else if (sessionValue !== undefined && auth.sessionSecret) {
    // Off mode trusts headers, but a cookie that is there must still be valid and agree with them.
    if (!cookie) throw unauthorized();
    if (!app && !space) identity = cookie;
    else if (app !== cookie.app || space !== cookie.space) throw unauthorized();
  }

  const required =
    access === "context" ||
    access === "internal" ||
    access === "external" ||
    (access === "contextEnv" && auth.mode === "signature");
  // One of app and space is a scope half given, on every endpoint: a lookup or list "without
  // scope" (docs/auth.md) is one with neither, never one whose caller forgot a header.
  if (required || identity.app || identity.space) {
    const missing = [
      identity.app ? null : "app",
      identity.space ? null : "space",
      access === "context" && identity.user === undefined ? "user" : null,
    ].filter((h) => h !== null);
    if (missing.length > 0) throw missingHeaders(missing, access);
  }
  const scope =
    identity.app && identity.space ? { app: identity.app, space: identity.space } : null;
  return { scope, user: identity.user ?? null, language };
}

/**
 * One error naming every missing scope header at once (docs/auth.md, "Headers per endpoint"), so
 * that a caller who sent none learns the whole set from one answer.
 */
function missingHeaders(missing: string[], access: Access): SluiceError {
  const needed = access === "context" ? "app, space and user" : "app and space";
  const list =
    missing.length === 1 ? `header ${missing[0]} is` : `headers ${missing.join(", ")} are`;
  return badRequest(`${list} required (this endpoint needs ${needed}, or a session cookie)`);
}

/** Resolves every request's context before its body is even parsed, so auth answers first. */
export const contextPlugin = fp(
  async (app: FastifyInstance, opts: { config: Config; nowS: () => number }) => {
    app.decorateRequest("ctx", null as unknown as RequestContext);
    app.addHook("onRequest", async (req) => {
      const access = req.routeOptions.config.access;
      req.ctx = access
        ? resolveContext(opts.config, req, access, opts.nowS())
        : { scope: null, user: null, language: languageOf(req.headers.language) };
    });
  },
  { name: "sluice-context" },
);

/** The scope of a route whose access guarantees one. */
export function scopeOf(req: FastifyRequest): Scope {
  if (!req.ctx.scope) throw badRequest("header app is required");
  return req.ctx.scope;
}
