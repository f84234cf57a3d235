import assert from "node:assert/strict";
import { randomBytes } from "node:crypto";
import { describe, it } from "node:test";
import {
  decryptWith,
  encryptValue,
  parseKey,
  SecretUnreadable,
  tryDecrypt,
} from "../../src/secrets/crypto.ts";

const KEY = randomBytes(32);
const OTHER = randomBytes(32);
const AAD = "secret\u0000app1\u0000space1\u0000TOKEN";

describe("secret crypto", () => {
  it("round-trips a value, unicode included", () => {
    for (const v of ["s3cr3t", "пароль ✓ 密码", "x".repeat(70_000)]) {
      assert.equal(tryDecrypt(KEY, encryptValue(KEY, v, AAD), AAD), v);
    }
  });

  it("uses a fresh nonce per value: the same value encrypts differently each time", () => {
    const a = encryptValue(KEY, "same", AAD);
    const b = encryptValue(KEY, "same", AAD);
    assert.notEqual(a, b);
    const nonce = (s: string) => Buffer.from(s.slice(3), "base64").subarray(0, 12).toString("hex");
    assert.notEqual(nonce(a), nonce(b));
    assert.ok(!a.includes("same") && !Buffer.from(a.slice(3), "base64").includes("same"));
  });

  it("detects tampering with any byte, and a ciphertext moved to another row", () => {
    const stored = encryptValue(KEY, "value", AAD);
    const raw = Buffer.from(stored.slice(3), "base64");
    for (const i of [0, 12, raw.length - 1]) {
      const bad = Buffer.from(raw);
      bad[i] = (bad[i] ?? 0) ^ 1;
      assert.equal(tryDecrypt(KEY, `v1.${bad.toString("base64")}`, AAD), undefined, `byte ${i}`);
    }
    assert.equal(tryDecrypt(KEY, stored, "secret\u0000app1\u0000space2\u0000TOKEN"), undefined);
    assert.throws(() => tryDecrypt(KEY, "v1.AAAA", AAD), SecretUnreadable);
    assert.throws(() => tryDecrypt(KEY, "plain", AAD), SecretUnreadable);
  });

  it("a wrong key does not open a value", () => {
    assert.equal(tryDecrypt(OTHER, encryptValue(KEY, "v", AAD), AAD), undefined);
  });

  it("rotation: the previous key opens old values and says so; neither key is refused", () => {
    const old = encryptValue(OTHER, "old", AAD);
    const fresh = encryptValue(KEY, "new", AAD);
    const ring = { current: KEY, previous: OTHER };
    assert.deepEqual(decryptWith(ring, old, AAD), { value: "old", rotated: true });
    assert.deepEqual(decryptWith(ring, fresh, AAD), { value: "new", rotated: false });
    assert.throws(
      () => decryptWith({ current: KEY, previous: undefined }, old, AAD),
      SecretUnreadable,
    );
  });

  it("parses 32-byte keys as hex or base64; a bad key's message never shows it", () => {
    assert.deepEqual(parseKey(KEY.toString("hex"), "SECRETS_KEY"), KEY);
    assert.deepEqual(parseKey(KEY.toString("base64"), "SECRETS_KEY"), KEY);
    assert.deepEqual(parseKey(` ${KEY.toString("base64url")}\n`, "SECRETS_KEY"), KEY);
    for (const bad of ["short", randomBytes(16).toString("base64"), "zz".repeat(32)]) {
      assert.throws(
        () => parseKey(bad, "SECRETS_KEY"),
        (err: Error) => err.message.includes("SECRETS_KEY") && !err.message.includes(bad),
      );
    }
  });
});
