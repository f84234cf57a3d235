import assert from "node:assert/strict";
import { describe, it } from "node:test";
import {
  makeSessionCookie,
  readSessionCookie,
  sessionFromCookieHeader,
  signToken,
  verifyToken,
} from "../../src/auth/tokens.ts";

const id = { app: "a", space: "s", user: "u" };

describe("tokens", () => {
  it("signs the contract's HMAC over app, space, user and time", async () => {
    const { createHmac } = await import("node:crypto");
    const expected = createHmac("sha256", "k").update("a\ns\nu\n1000").digest("hex");
    assert.equal(signToken("k", id, 1000), `1000.${expected}`);
  });

  it("accepts a fresh token and rejects wrong secret, other identity, expired and malformed", () => {
    const t = signToken("k", id, 1000);
    assert.equal(verifyToken("k", t, id, 1100, 300), true);
    assert.equal(verifyToken("k", t, id, 700, 300), true);
    assert.equal(verifyToken("other", t, id, 1000, 300), false);
    assert.equal(verifyToken("k", t, { ...id, space: "s2" }, 1000, 300), false);
    assert.equal(verifyToken("k", t, id, 1301, 300), false);
    assert.equal(verifyToken("k", "garbage", id, 1000, 300), false);
    assert.equal(verifyToken("k", "1000.abc", id, 1000, 300), false);
  });

  it("round-trips a session cookie and rejects tampering and expiry", () => {
    const c = makeSessionCookie("sess", id, 2000);
    assert.deepEqual(readSessionCookie("sess", c, 1000), id);
    assert.equal(readSessionCookie("sess", c, 2001), null);
    assert.equal(readSessionCookie("other", c, 1000), null);
    const [payload, sig] = c.split(".");
    const forged = Buffer.from(
      JSON.stringify({ app: "a", space: "x", user: "u", exp: 2000 }),
    ).toString("base64url");
    assert.equal(readSessionCookie("sess", `${forged}.${sig}`, 1000), null);
    assert.ok(payload);
  });

  it("finds the session cookie among others", () => {
    assert.equal(sessionFromCookieHeader("a=1; session=xyz.abc; b=2"), "xyz.abc");
    assert.equal(sessionFromCookieHeader("a=1"), undefined);
  });
});
