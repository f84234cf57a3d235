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

const rawHeader = (req: FastifyRequest, name: string): string | undefined => {
  const v = req.headers[name];
  const s = Array.isArray(v) ? v[0] : v;
  return s === undefined || s === "" ? undefined : s;
};
const header = (req: FastifyRequest, name: string): string | undefined => {
  const s = rawHeader(req, name);
  return s === undefined ? undefined : headerText(s);
};

/**
 * A header value's text (docs/auth.md, "Headers per endpoint"). Node reads header bytes as
 * Latin-1, so a user "张三" sent as UTF-8 (Go's net/http, a gateway passing it through) became
 * "å¼ ä¸\x89". Bytes that are UTF-8 for a text with a character past U+00FF are read as UTF-8;
 * all others stay Latin-1 (Python's requests, Node and Java gateways write a `str` header that
 * way). The reading is one-to-one: a text past U+00FF has one byte form, a text within it has
 * one. Reading every UTF-8 value as UTF-8 made 0xfc ("Müller" in Latin-1) and 0xc3 0xbc ("MÃ¼ller"
 * in Latin-1, "Müller" in UTF-8) one scope, so a gateway's tenant "MÃ¼ller" reached "Müller".
 */
export function headerText(value: string): string {
  if (!NON_ASCII.test(value)) return value;
  const bytes = Buffer.from(value, "latin1");
  if (!isUtf8(bytes)) return value;
  const text = bytes.toString("utf8");
  return BEYOND_LATIN1.test(text) ? text : value;
}
const NON_ASCII = /[\u0080-\uffff]/;
const BEYOND_LATIN1 = /[\u0100-\uffff]/;

/**
 * A header value read as UTF-8 wherever its bytes are UTF-8: the second reading a token may sign
 * (a Go client's "Müller", 0xc3 0xbc). Only a signature decides it, never a scope alone.
 */
function utf8Text(value: string): string {
  if (!NON_ASCII.test(value)) return value;
  const bytes = Buffer.from(value, "latin1");
  return isUtf8(bytes) ? bytes.toString("utf8") : value;
}

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
    // headersDistinct is Node's own request's; an injected request (tests, app.inject) has none.
    const n = req.raw.headersDistinct?.[name]?.length ?? 0;
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
      const verifies = (id: Identity) => tokenVerifies(config, access, token, id, nowS);
      // The text a token signs is the scope; a header's other reading counts only when signed.
      const utf8 = (name: string) => utf8Text(rawHeader(req, name) ?? "");
      const alt = { app: utf8("app"), space: utf8("space"), user: utf8("user") };
      if (verifies({ app, space, user })) identity = { app, space, user };
      else if (sameIdentity(alt, { app, space, user }) || !verifies(alt)) throw unauthorized();
      else identity = alt;
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

/** Whether `token` signs `id` with a secret the endpoint accepts (docs/auth.md, "Token"). */
function tokenVerifies(
  config: Config,
  access: Access,
  token: string,
  id: Identity,
  nowS: number,
): boolean {
  const auth = config.auth;
  const secrets: (string | undefined)[] = [];
  if (access === "internal" || access === "lookup") secrets.push(auth.internalSecret);
  // Own keys only: an app named "__proto__" or "constructor" must not reach Object.prototype.
  if (access !== "internal" && Object.hasOwn(auth.appSecrets, id.app))
    secrets.push(auth.appSecrets[id.app]);
  return secrets.some((s) => s !== undefined && verifyToken(s, token, id, nowS, auth.tokenTtlS));
}

const sameIdentity = (a: Identity, b: Identity): boolean =>
  a.app === b.app && a.space === b.space && a.user === b.user;

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
