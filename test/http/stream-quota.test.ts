import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { createStreamQuota } from "../../src/http/stream-quota.ts";

const refused = (f: () => unknown) =>
  assert.throws(f, (e: Error & { code?: number }) => {
    assert.equal(e.code, 429);
    return true;
  });

describe("stream quota", () => {
  it("counts each app and space apart, gives a place back once however often it is freed", () => {
    const q = createStreamQuota(2);
    const a = { app: "shop", space: "prod" };
    const frees = [q.take(a), q.take(a)];
    refused(() => q.take(a));
    // Another space, and a name that would run into the first one's if joined naively.
    q.take({ app: "shop", space: "test" });
    q.take({ app: 'shop","prod', space: "" });
    frees[0]?.();
    frees[0]?.();
    q.take(a);
    refused(() => q.take(a));
  });

  it("counts callers without a scope together", () => {
    const q = createStreamQuota(1);
    q.take(null);
    refused(() => q.take(null));
  });
});
