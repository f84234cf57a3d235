import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { createHeldQuota } from "../../src/http/held-quota.ts";

const refused = (f: () => unknown, message: RegExp) =>
  assert.throws(f, (e: Error & { code?: number }) => {
    assert.equal(e.code, 429);
    assert.match(e.message, message);
    return true;
  });

const roomy = { liveStreams: 1000, heldRequestsPerApp: 1000, heldRequests: 1000 };

describe("held quota", () => {
  it("counts each app and space's streams apart, gives a place back once however often it is freed", () => {
    const q = createHeldQuota({ ...roomy, liveStreams: 2 });
    const a = { app: "shop", space: "prod" };
    const frees = [q.take(a, "stream"), q.take(a, "stream")];
    refused(() => q.take(a, "stream"), /LIMIT_LIVE_STREAMS/);
    // Waits are not streams; another space, and a name that would run into the first one's if
    // joined naively, have streams of their own.
    q.take(a, "wait");
    q.take({ app: "shop", space: "test" }, "stream");
    q.take({ app: 'shop","prod', space: "" }, "stream");
    frees[0]?.();
    frees[0]?.();
    q.take(a, "stream");
    refused(() => q.take(a, "stream"), /LIMIT_LIVE_STREAMS/);
  });

  it("counts an app over all its spaces, streams and waits together", () => {
    const q = createHeldQuota({ ...roomy, heldRequestsPerApp: 3 });
    const free = q.take({ app: "shop", space: "s1" }, "stream");
    q.take({ app: "shop", space: "s2" }, "wait");
    q.take({ app: "shop", space: "s3" }, "wait");
    refused(() => q.take({ app: "shop", space: "s4" }, "wait"), /LIMIT_HELD_REQUESTS_PER_APP/);
    refused(() => q.take({ app: "shop", space: "s1" }, "stream"), /LIMIT_HELD_REQUESTS_PER_APP/);
    // Another app is not held back by this one.
    q.take({ app: "other", space: "s1" }, "wait");
    free();
    q.take({ app: "shop", space: "s4" }, "wait");
  });

  it("counts every app together up to the node's bound", () => {
    const q = createHeldQuota({ ...roomy, heldRequests: 2 });
    const free = q.take({ app: "a", space: "s" }, "wait");
    q.take({ app: "b", space: "s" }, "stream");
    refused(() => q.take({ app: "c", space: "s" }, "wait"), /2 waiting requests on this node/);
    free();
    q.take({ app: "c", space: "s" }, "wait");
  });

  it("counts callers without a scope together", () => {
    const q = createHeldQuota({ ...roomy, liveStreams: 1, heldRequestsPerApp: 2 });
    q.take(null, "stream");
    refused(() => q.take(null, "stream"), /LIMIT_LIVE_STREAMS/);
    q.take(null, "wait");
    refused(() => q.take(null, "wait"), /LIMIT_HELD_REQUESTS_PER_APP/);
  });
});
