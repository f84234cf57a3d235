import { createCipheriv, createDecipheriv, randomBytes } from "node:crypto";
import { StartupError } from "../errors.ts";

/**
 * Secret values at rest (docs/secrets.md): AES-256-GCM, a fresh 96-bit nonce per value, and the
 * row's identity as associated data, so a ciphertext copied onto another secret's row (or scope)
 * does not decrypt there. Stored as text, `v1.` + base64(nonce ‖ ciphertext ‖ tag), in both dialects.
 */

const VERSION = "v1.";
const NONCE_BYTES = 12;
const TAG_BYTES = 16;
export const KEY_BYTES = 32;

/** A value that no key of the ring opens: wrong key, or the stored text was changed. */
export class SecretUnreadable extends Error {}

export function encryptValue(key: Buffer, plaintext: string, aad: string): string {
  const nonce = randomBytes(NONCE_BYTES);
  const cipher = createCipheriv("aes-256-gcm", key, nonce);
  cipher.setAAD(Buffer.from(aad, "utf8"));
  const body = Buffer.concat([cipher.update(plaintext, "utf8"), cipher.final()]);
  return VERSION + Buffer.concat([nonce, body, cipher.getAuthTag()]).toString("base64");
}

/** The plaintext, or undefined when this key does not open it (GCM's tag check failed). */
export function tryDecrypt(key: Buffer, stored: string, aad: string): string | undefined {
  if (!stored.startsWith(VERSION)) throw new SecretUnreadable("unknown secret encoding");
  const raw = Buffer.from(stored.slice(VERSION.length), "base64");
  if (raw.length < NONCE_BYTES + TAG_BYTES) throw new SecretUnreadable("truncated secret value");
  const nonce = raw.subarray(0, NONCE_BYTES);
  const tag = raw.subarray(raw.length - TAG_BYTES);
  const body = raw.subarray(NONCE_BYTES, raw.length - TAG_BYTES);
  const decipher = createDecipheriv("aes-256-gcm", key, nonce);
  decipher.setAAD(Buffer.from(aad, "utf8"));
  decipher.setAuthTag(tag);
  try {
    return Buffer.concat([decipher.update(body), decipher.final()]).toString("utf8");
  } catch {
    return undefined;
  }
}

/** The current key and, during a rotation, the previous one (SECRETS_KEY_PREVIOUS). */
export interface KeyRing {
  current: Buffer;
  previous: Buffer | undefined;
}

/** Opens with the current key, else the previous; `rotated` says the previous one was needed. */
export function decryptWith(
  ring: KeyRing,
  stored: string,
  aad: string,
): { value: string; rotated: boolean } {
  const now = tryDecrypt(ring.current, stored, aad);
  if (now !== undefined) return { value: now, rotated: false };
  const before = ring.previous && tryDecrypt(ring.previous, stored, aad);
  if (before !== undefined) return { value: before, rotated: true };
  throw new SecretUnreadable("no configured key opens the stored value");
}

/**
 * A 32-byte key given as 64 hex digits or as base64 (44 characters with padding). The message
 * names the variable and what is wrong, never the value.
 */
export function parseKey(raw: string, variable: string): Buffer {
  const text = raw.trim();
  let key: Buffer | undefined;
  if (/^[0-9a-fA-F]{64}$/.test(text)) key = Buffer.from(text, "hex");
  else if (/^[A-Za-z0-9+/_-]+={0,2}$/.test(text)) key = Buffer.from(text, "base64");
  if (key?.length !== KEY_BYTES) {
    throw new StartupError(
      `config: ${variable} must be ${KEY_BYTES} bytes written as 64 hex digits or as base64 ` +
        `(e.g. the output of \`openssl rand -base64 32\`)`,
    );
  }
  return key;
}
