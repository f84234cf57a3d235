import { createHmac, randomBytes, timingSafeEqual } from "node:crypto";

/** The header a receiver verifies (docs/webhooks.md, "Verifying a delivery"). */
export const SIGNATURE_HEADER = "sluice-signature";

/** A new per-space signing secret: 32 random bytes, hex, with a prefix that says what it is. */
export const newSecret = (): string => `whsec_${randomBytes(32).toString("hex")}`;

/** `t=<unix seconds>,v1=<hex HMAC-SHA256 of "<t>.<body>">`. */
export function sign(secret: string, unixSeconds: number, body: string): string {
  const mac = createHmac("sha256", secret).update(`${unixSeconds}.${body}`).digest("hex");
  return `t=${unixSeconds},v1=${mac}`;
}

/**
 * What a receiver does (docs/webhooks.md): recompute the MAC over the timestamp and the raw body,
 * compare in constant time, and refuse a timestamp older than `toleranceS`.
 */
export function verify(
  secret: string,
  header: string,
  body: string,
  nowS: number,
  toleranceS = 300,
): boolean {
  const parts = Object.fromEntries(header.split(",").map((p) => p.split("=", 2)));
  const t = Number(parts.t);
  if (!Number.isInteger(t) || Math.abs(nowS - t) > toleranceS) return false;
  const want = Buffer.from(sign(secret, t, body).split("v1=")[1] ?? "", "hex");
  const got = Buffer.from(String(parts.v1 ?? ""), "hex");
  return got.length === want.length && timingSafeEqual(got, want);
}
