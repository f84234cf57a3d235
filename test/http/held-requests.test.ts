import assert from "node:assert/strict";
import net from "node:net";
import { after, before, describe, it } from "node:test";
import { DF, deployAndActivate } from "../helpers/flows.ts";
import { gatedScript, release } from "../helpers/gate-file.ts";
import { scopeHeaders, startServer, TEST_MODE, type TestServer } from "../helpers/server.ts";
import { openSse, type SseClient } from "../helpers/sse.ts";
import { pollUntil } from "../helpers/wait.ts";

/** A run that holds until the test lets it go, so whoever waits for it keeps waiting. */
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

const PER_APP = 4;
const PER_NODE = 6;

const scope = (app: string, space: string) => scopeHeaders({ app, space, user: "u" });

/**
 * Requests that wait (event streams, `?timeout=` long polls, a keyed run-sync's retry) hold a
 * socket and the service's memory while they wait (docs/live-progress.md, "Bounds"). A tenant
 * could hold any number of them: LIMIT_LIVE_STREAMS counted streams per space only (an app has
 * as many spaces as it names), long polls were not counted at all, and a long poll whose client
 * went kept waiting up to MAX_WAIT_S, so a client that opened and dropped connections in a loop
 * grew the service's heap (about 9 KB each) without holding a single socket.
 */
describe(`requests that wait, per app and per node (${TEST_MODE})`, () => {
  let server: TestServer;
  const clients: SseClient[] = [];
  const runs = new Map<string, string>();
  before(async () => {
    server = await startServer({
      LIMIT_HELD_REQUESTS: String(PER_NODE),
      LIMIT_HELD_REQUESTS_PER_APP: String(PER_APP),
    });
    for (const [app, space] of [
      ["app1", "s1"],
      ["app1", "s2"],
      ["app2", "s1"],
      ["app3", "s1"],
    ] as const) {
      const h = scope(app, space);
      await deployAndActivate(server, "held", HELD, {}, h);
      const r = await server.call("POST", `${DF}/run`, {
        headers: h,
        body: { elementName: "held", parameter: {} },
      });
      assert.equal(r.body.status, true, r.text);
      runs.set(`${app}/${space}`, r.body.data);
    }
  });
  after(async () => {
    for (const c of clients) c.abort();
    for (const id of runs.values()) await release(server.dataDir, id).catch(() => {});
    await server?.close();
  });

  const runOf = (app: string, space: string) => runs.get(`${app}/${space}`) ?? "";
  const port = () => Number(new URL(server.url).port);

  /** A raw request left waiting on its own socket (closed by the test when it wants). */
  const rawWait = (head: string, body = "") =>
    new Promise<net.Socket>((resolve) => {
      const sock = net.connect(port(), "127.0.0.1", () => {
        sock.write(head + body);
        resolve(sock);
      });
      sock.on("error", () => {});
    });
  const longPollHead = (app: string, space: string) =>
    `GET ${DF}/run/${runOf(app, space)}/result?timeout=3600 HTTP/1.1\r\nhost: x\r\n` +
    `app: ${app}\r\nspace: ${space}\r\n\r\n`;
  const waiting = () => server.services.events.waiting();
  /** Long polls the node holds now (its `sluice_held_requests` gauge). */
  const heldWaits = async () => {
    const text = await (await fetch(`${server.url}/metrics`)).text();
    return Number(/^sluice_held_requests\{kind="wait"\} (\d+)$/m.exec(text)?.[1] ?? -1);
  };

  it("a long poll, or a keyed run-sync retry, whose client went stops waiting at once", async () => {
    const runId = runOf("app3", "s1");
    assert.equal(waiting(), 0, "nobody waits for a run yet");
    // The first keyed run-sync's own wait elapses; its run goes on.
    const key = { ...scope("app3", "s1"), "idempotency-key": "k1" };
    const first = await server.call("POST", `${DF}/run-sync`, {
      headers: key,
      body: { elementName: "held", parameter: { n: 1 }, timeout: 1 },
    });
    assert.equal(first.body.code, 28020006, first.text);
    assert.equal(waiting(), 0);
    const body = JSON.stringify({ elementName: "held", parameter: { n: 1 } });
    const retryHead =
      `POST ${DF}/run-sync HTTP/1.1\r\nhost: x\r\napp: app3\r\nspace: s1\r\nuser: u\r\n` +
      `idempotency-key: k1\r\ncontent-type: application/json\r\n` +
      `content-length: ${Buffer.byteLength(body)}\r\n\r\n`;
    const sockets = [
      ...(await Promise.all(Array.from({ length: 3 }, () => rawWait(longPollHead("app3", "s1"))))),
      await rawWait(retryHead, body),
    ];
    await pollUntil(waiting, (n) => n === 2, "the long polls and the retry wait for their runs");
    for (const s of sockets) s.destroy();
    await pollUntil(waiting, (n) => n === 0, "nothing waits once the clients went");
    assert.ok(runId);
  });

  it("bounds an app's waiting requests over all its spaces, and the node's, with a 429", async () => {
    const held: net.Socket[] = [];
    const lookFor = async (app: string, space: string) => {
      const r = await server.call("GET", `${DF}/run/${runOf(app, space)}/result?timeout=3600`, {
        headers: scope(app, space),
      });
      return r.body;
    };
    // app1: two long polls in s1, two event streams in s2: its four places, in two spaces.
    for (let i = 0; i < 2; i++) held.push(await rawWait(longPollHead("app1", "s1")));
    for (let i = 0; i < 2; i++) {
      const c = await openSse(`${server.url}${DF}/run/${runOf("app1", "s2")}/events`, {
        ...scope("app1", "s2"),
      });
      clients.push(c);
      await c.next((m) => m.event === "state");
    }
    await pollUntil(heldWaits, (n) => n === 2, "app1's long polls wait");
    const overApp = await lookFor("app1", "s2");
    assert.equal(overApp.code, 429, JSON.stringify(overApp));
    assert.match(overApp.message, /4 waiting requests of this app.*LIMIT_HELD_REQUESTS_PER_APP/);
    const stream = await fetch(`${server.url}${DF}/run/${runOf("app1", "s1")}/events`, {
      headers: scope("app1", "s1"),
    });
    assert.equal(((await stream.json()) as { code: number }).code, 429);
    // A poll that does not wait is not held back.
    const now = await server.call("GET", `${DF}/run/${runOf("app1", "s1")}/result`, {
      headers: scope("app1", "s1"),
    });
    assert.equal(now.body.code, 28020003, now.text);

    // app2 is not held back by app1, up to the node's bound.
    for (let i = 0; i < 2; i++) held.push(await rawWait(longPollHead("app2", "s1")));
    await pollUntil(heldWaits, (n) => n === 4, "app2's long polls wait");
    const overNode = await lookFor("app3", "s1");
    assert.equal(overNode.code, 429, JSON.stringify(overNode));
    assert.match(overNode.message, /6 waiting requests on this node.*LIMIT_HELD_REQUESTS\b/);

    // A client that goes gives its place back at once: app3's long poll then waits.
    held.shift()?.destroy();
    await pollUntil(heldWaits, (n) => n === 3, "the place of the client that went is free");
    const s = await rawWait(longPollHead("app3", "s1"));
    held.push(s);
    let answer = "";
    s.on("data", (d: Buffer) => {
      answer += d.toString();
    });
    await pollUntil(heldWaits, (n) => n === 4, "app3's long poll waits");
    assert.equal(answer, "");
    for (const s of held) s.destroy();
  });
});
