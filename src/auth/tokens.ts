import { createHmac, timingSafeEqual } from "node:crypto";

/** Token and session-cookie formats of docs/auth.md. Pure: the clock is passed in. */

export interface Identity {
  app: string;
  space: string;
  user: string;
}

function hmacHex(secret: string, text: string): string {
  return createHmac("sha256", secret).update(text).digest("hex");
}

function safeEqual(a: string, b: string): boolean {
  const ab = Buffer.from(a);
  const bb = Buffer.from(b);
  return ab.length === bb.length && timingSafeEqual(ab, bb);
}

export function signToken(secret: string, id: Identity, unixSeconds: number): string {
  return `${unixSeconds}.${hmacHex(secret, `${id.app}\n${id.space}\n${id.user}\n${unixSeconds}`)}`;
}

export function verifyToken(
  secret: string,
  token: string,
  id: Identity,
  nowS: number,
  ttlS: number,
): boolean {
  const dot = token.indexOf(".");
  if (dot <= 0) return false;
  const stamp = token.slice(0, dot);
  if (!/^\d+$/.test(stamp)) return false;
  const ts = Number(stamp);
  if (Math.abs(nowS - ts) > ttlS) return false;
  return safeEqual(
    token.slice(dot + 1),
    hmacHex(secret, `${id.app}\n${id.space}\n${id.user}\n${stamp}`),
  );
}

export function makeSessionCookie(secret: string, id: Identity, expS: number): string {
  const payload = Buffer.from(
    JSON.stringify({ app: id.app, space: id.space, user: id.user, exp: expS }),
  ).toString("base64url");
  const sig = createHmac("sha256", secret).update(payload).digest("base64url");
  return `${payload}.${sig}`;
}

export function readSessionCookie(secret: string, cookie: string, nowS: number): Identity | null {
  const dot = cookie.indexOf(".");
  if (dot <= 0) return null;
  const payload = cookie.slice(0, dot);
  const sig = createHmac("sha256", secret).update(payload).digest("base64url");
  if (!safeEqual(cookie.slice(dot + 1), sig)) return null;
  try {
    const body = JSON.parse(Buffer.from(payload, "base64url").toString("utf8")) as Record<
      string,
      unknown
    >;
    const { app, space, user, exp } = body;
    if (typeof app !== "string" || typeof space !== "string" || typeof exp !== "number")
      return null;
    if (exp < nowS) return null;
    return { app, space, user: typeof user === "string" ? user : "" };
  } catch {
    return null;
  }
}

/** The `session` value out of a Cookie header. */
export function sessionFromCookieHeader(header: string | undefined): string | undefined {
  if (!header) return undefined;
  for (const part of header.split(";")) {
    const eq = part.indexOf("=");
    if (eq > 0 && part.slice(0, eq).trim() === "session") return part.slice(eq + 1).trim();
  }
  return undefined;
}
