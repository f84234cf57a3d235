import assert from "node:assert/strict";
import net from "node:net";
import { after, before, describe, it } from "node:test";
import { DF, deployAndActivate } from "../helpers/flows.ts";
import { gatedScript, release } from "../helpers/gate-file.ts";
import { scopeHeaders, startServer, TEST_MODE, type TestServer } from "../helpers/server.ts";
import { openSse, type SseClient } from "../helpers/sse.ts";

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

/** Writes `text` on one connection; resolves with all it read once the server closed it. */
function exchange(port: number, text: string, until: (read: string) => boolean): Promise<string> {
  return new Promise((resolve, reject) => {
    const sock = net.connect(port, "127.0.0.1");
    let read = "";
    sock.on("data", (d: Buffer) => {
      read += d.toString("utf8");
      if (until(read)) {
        sock.destroy();
        resolve(read);
      }
    });
    sock.on("close", () => resolve(read));
    sock.on("error", reject);
    sock.write(text);
  });
}

/**
 * An event stream answers what the client asked for (docs/live-progress.md): a HEAD gets the
 * stream's headers and its answer ends, instead of a stream that held the connection and a
 * place of LIMIT_LIVE_STREAMS until the run ended (a request after it on the same connection
 * waited as long); a client that sent `Connection: close` has its connection closed once the
 * stream ends, which `connection: keep-alive`, forced on every stream, had kept open.
 */
describe(`HEAD and Connection: close on event streams (${TEST_MODE})`, () => {
  let server: TestServer;
  let port: number;
  const h = scopeHeaders();
  const head = Object.entries({ host: "127.0.0.1", ...h })
    .map(([k, v]) => `${k}: ${v}\r\n`)
    .join("");
  const clients: SseClient[] = [];
  before(async () => {
    server = await startServer({ LIMIT_LIVE_STREAMS: "1" });
    port = Number(new URL(server.url).port);
    await deployAndActivate(server, "held", HELD);
  });
  after(async () => {
    for (const c of clients) c.abort();
    await server?.close();
  });

  it("a HEAD of a running run's events ends at once, holding no stream", async () => {
    const r = await server.call("POST", `${DF}/run`, {
      headers: h,
      body: { elementName: "held", parameter: {} },
    });
    const runId = r.body.data as string;
    // Two HEADs, then a GET of /health, on one kept-alive connection: all three are answered.
    const events = `HEAD ${DF}/run/${runId}/events HTTP/1.1\r\n${head}\r\n`;
    const read = await exchange(
      port,
      `${events}${events}GET /health HTTP/1.1\r\nhost: 127.0.0.1\r\n\r\n`,
      (text) => text.includes('"status":"ok"'),
    );
    const answers = read.split(/(?=HTTP\/1\.1 )/);
    assert.equal(answers.length, 3, read);
    for (const a of answers.slice(0, 2)) {
      assert.match(a, /^HTTP\/1\.1 200 /);
      assert.match(a, /content-type: text\/event-stream/i);
    }
    // The one place of this tenant (LIMIT_LIVE_STREAMS=1) is free for a real stream.
    const c = await openSse(`${server.url}${DF}/run/${runId}/events`, h);
    clients.push(c);
    await c.next((m) => m.event === "state");
    await release(server.dataDir, runId);
    await c.next((m) => m.event === "end");
  });

  it("a client's Connection: close is kept: the connection closes when the stream ends", async () => {
    const r = await server.call("POST", `${DF}/run`, {
      headers: h,
      body: { elementName: "held", parameter: {} },
    });
    const runId = r.body.data as string;
    await release(server.dataDir, runId);
    await server.call("GET", `${DF}/run/${runId}/result?timeout=60`, { headers: h });
    const read = await exchange(
      port,
      `GET ${DF}/run/${runId}/events HTTP/1.1\r\n${head}connection: close\r\n\r\n`,
      () => false,
    );
    assert.match(read, /event: end/);
    assert.doesNotMatch(read, /connection: keep-alive/i);
    // Any other client's stream says keep-alive, as before: without it, a stop of the service
    // with streams open waited about 70 s in cluster mode (docs/live-progress.md).
    const kept = await exchange(
      port,
      `GET ${DF}/run/${runId}/events HTTP/1.1\r\n${head}\r\n`,
      (text) => text.includes("event: end"),
    );
    assert.match(kept, /\r\nconnection: keep-alive\r\n/i);
    assert.doesNotMatch(kept, /\r\nkeep-alive: timeout/i);
  });
});
