import assert from "node:assert/strict";
import net from "node:net";
import { after, before, describe, it } from "node:test";
import type { Store } from "../../src/store/types.ts";
import { DF, deployAndActivate } from "../helpers/flows.ts";
import { scopeHeaders, startServer, TEST_MODE, type TestServer } from "../helpers/server.ts";
import { openSse } from "../helpers/sse.ts";
import { within } from "../helpers/wait.ts";

const QUICK = {
  vertexes: [
    { id: "in", type: "input" },
    { id: "out", type: "output" },
  ],
  edges: [{ source: "in", target: "out" }],
};

/**
 * A tenant's open event streams are bounded (LIMIT_LIVE_STREAMS, docs/live-progress.md); a stream
 * that never opens must not keep a place. Here with a limit of one: every leaked place shows at
 * once as a 429 for the next stream.
 */
describe(`event streams give their place back (${TEST_MODE})`, () => {
  let server: TestServer;
  let runId: string;
  const h = scopeHeaders();
  const events = () => `${server.url}${DF}/run/${runId}/events`;
  const streamOpens = async (what: string) => {
    const c = await openSse(events(), h);
    assert.match(c.contentType ?? "", /^text\/event-stream/, `${what}: ${JSON.stringify(c)}`);
    await within(c.closed, 30_000, `${what}: the stream of an ended run ends`);
    assert.equal(c.messages.at(-1)?.event, "end");
  };

  before(async () => {
    server = await startServer({ LIMIT_LIVE_STREAMS: "1" });
    await deployAndActivate(server, "quick", QUICK);
    const r = await server.call("POST", `${DF}/run-sync`, {
      headers: h,
      body: { elementName: "quick", parameter: {} },
    });
    assert.equal(r.body.status, true, r.text);
    runId = r.headers.get("x-run-id") ?? "";
  });
  after(async () => {
    await server?.close();
  });

  it("a run of no such id: an envelope, as JSON", async () => {
    const r = await fetch(`${server.url}${DF}/run/nope/events`, { headers: h });
    assert.match(r.headers.get("content-type") ?? "", /^application\/json/);
    assert.equal(((await r.json()) as { code: number }).code, 28020002);
  });

  it("a stream that ends with its run", async () => {
    await streamOpens("first");
    await streamOpens("second");
  });

  it("a client that goes while the run is read, before the stream opens", async () => {
    const store = server.services.store as Store;
    const getRun = store.getRun;
    let entered = () => {};
    const reading = new Promise<void>((resolve) => {
      entered = resolve;
    });
    let letGo = () => {};
    const held = new Promise<void>((resolve) => {
      letGo = resolve;
    });
    store.getRun = async (scope, id) => {
      const run = await getRun.call(store, scope, id);
      if (id === runId) {
        entered();
        await held;
      }
      return run;
    };
    const sockets: net.Socket[] = [];
    const onConnection = (s: net.Socket) => sockets.push(s);
    server.app.server.on("connection", onConnection);
    try {
      const client = net.connect(Number(new URL(server.url).port), "127.0.0.1");
      await new Promise<void>((resolve) => client.once("connect", resolve));
      const head = Object.entries(h).map(([k, v]) => `${k}: ${v}\r\n`);
      client.write(`GET ${DF}/run/${runId}/events HTTP/1.1\r\nhost: x\r\n${head.join("")}\r\n`);
      await within(reading, 30_000, "the route reads the run");
      const mine = sockets.find((s) => s.remotePort === client.localPort);
      assert.ok(mine, "the service's side of the connection");
      const gone = new Promise<void>((resolve) => mine.once("close", () => resolve()));
      client.destroy();
      await within(gone, 30_000, "the service sees the client go");
    } finally {
      server.app.server.off("connection", onConnection);
      store.getRun = getRun;
      letGo();
    }
    await streamOpens("after the client that went");
  });
});
