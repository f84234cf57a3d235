import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { DF, deployAndActivate } from "../helpers/flows.ts";
import { gatedScript, release } from "../helpers/gate-file.ts";
import {
  OTHER_SCOPE,
  scopeHeaders,
  startServer,
  TEST_MODE,
  type TestServer,
} from "../helpers/server.ts";
import { openSse, type SseClient } from "../helpers/sse.ts";
import { pollUntil } from "../helpers/wait.ts";

/** A run that holds until the test lets it go, so its streams stay open. */
const HELD = {
  vertexes: [
    { id: "in", type: "input" },
    { id: "work", type: "script", config: { code: gatedScript([], []) } },
    { id: "out", type: "output" },
  ],
  edges: [
    { source: "in", target: "work" },
    { source: "work", target: "out" },
  ],
};

const LIMIT = 3;

/**
 * Each open event stream holds a socket and up to its queue of frames (docs/live-progress.md):
 * a tenant opening thousands of them on a run of its own grew the service without bound.
 */
describe(`open event streams per tenant (${TEST_MODE})`, () => {
  let server: TestServer;
  const clients: SseClient[] = [];
  before(async () => {
    server = await startServer({ LIMIT_LIVE_STREAMS: String(LIMIT) });
    for (const scope of [undefined, OTHER_SCOPE])
      await deployAndActivate(server, "held", HELD, {}, scopeHeaders(scope));
  });
  after(async () => {
    for (const c of clients) c.abort();
    await server?.close();
  });

  const start = async (headers: Record<string, string>) => {
    const r = await server.call("POST", `${DF}/run`, {
      headers,
      body: { elementName: "held", parameter: {} },
    });
    assert.equal(r.body.status, true, r.text);
    return r.body.data as string;
  };
  const watch = async (headers: Record<string, string>, runId: string) => {
    const c = await openSse(`${server.url}${DF}/run/${runId}/events`, headers);
    clients.push(c);
    return c;
  };

  it("refuses a tenant's stream past the limit with a 429 naming it; others and later ones open", async () => {
    const mine = scopeHeaders();
    const theirs = scopeHeaders(OTHER_SCOPE);
    const runId = await start(mine);
    const open: SseClient[] = [];
    for (let i = 0; i < LIMIT; i++) {
      const c = await watch(mine, runId);
      await c.next((m) => m.event === "state");
      open.push(c);
    }
    const refused = await fetch(`${server.url}${DF}/run/${runId}/events`, { headers: mine });
    assert.equal(refused.status, 200);
    const body = (await refused.json()) as { status: boolean; code: number; message: string };
    assert.equal(body.status, false);
    assert.equal(body.code, 429);
    assert.match(body.message, /3 open event streams.*LIMIT_LIVE_STREAMS/);
    // An envelope like any other: JSON, and in the caller's language.
    assert.match(refused.headers.get("content-type") ?? "", /^application\/json/);
    const zh = await fetch(`${server.url}${DF}/run/${runId}/events`, {
      headers: { ...mine, language: "zh-cn" },
    });
    assert.match(zh.headers.get("content-type") ?? "", /^application\/json/);
    assert.match(((await zh.json()) as { message: string }).message, /^请求过多：3 open event/);

    // Another tenant is not held back by this one's streams.
    const otherRun = await start(theirs);
    const other = await watch(theirs, otherRun);
    await other.next((m) => m.event === "state");

    // A stream that closes gives its place back (the service sees the socket close a moment
    // after the client lets go, and nothing announces it to the client).
    open[0]?.abort();
    const again = await pollUntil(
      async () => {
        const c = await watch(mine, runId);
        if (c.status === 200 && c.contentType?.startsWith("text/event-stream")) return c;
        c.abort();
        return undefined;
      },
      (c) => c !== undefined,
      "a stream opens once one of the tenant's closed",
    );
    await again?.next((m) => m.event === "state");

    for (const id of [runId, otherRun]) await release(server.dataDir, id);
    await again?.next((m) => m.event === "end");
  });
});
