import assert from "node:assert/strict";
import fs from "node:fs";
import net from "node:net";
import os from "node:os";
import path from "node:path";
import { after, before, describe, it } from "node:test";
import { gzipSync } from "node:zlib";
import { DF } from "../helpers/flows.ts";
import { killHard, startProcess } from "../helpers/process.ts";
import { rawRequest } from "../helpers/raw-http.ts";
import { modeEnv, SCOPE, startServer, type TestServer } from "../helpers/server.ts";
import { pollUntil } from "../helpers/wait.ts";

/**
 * Request bodies held at once (docs/errors.md, "Bad input"): each body is read whole and
 * parsed, so bodies sent together, each within LIMIT_BODY_BYTES, could take the process's memory
 * (200 parameters of 8 MiB: 6.5 GB). Bounded per node and per app; another app's body still fits.
 */
const MB = 1_000_000;
const port = (s: TestServer) => Number(new URL(s.url).port);

const headOf = (app: string, length: number | "chunked", encoding?: "gzip") =>
  `POST ${DF}/run HTTP/1.1\r\nHost: t\r\napp: ${app}\r\nspace: s\r\nuser: u\r\n` +
  "content-type: application/json\r\n" +
  (encoding ? `content-encoding: ${encoding}\r\n` : "") +
  (length === "chunked" ? "transfer-encoding: chunked\r\n" : `content-length: ${length}\r\n`) +
  "\r\n";

/** A run request of exactly `length` bytes for a flow that does not exist. */
const bodyOf = (length: number) => {
  const start = '{"elementName":"nope","parameter":"';
  return Buffer.from(`${start}${"x".repeat(length - start.length - 2)}"}`);
};

/** The envelope's code of a whole request of `length` bytes. */
async function codeOf(s: TestServer, app: string, length: number): Promise<number> {
  const a = await rawRequest(port(s), headOf(app, length), bodyOf(length), 30_000);
  return (JSON.parse(a.body.toString("utf8")) as { code: number }).code;
}

/** A request that sends all of its `length` bytes but the last: its body stays in flight. */
function held(s: TestServer, app: string, length: number): Promise<net.Socket> {
  return new Promise((resolve, reject) => {
    const sock = net.connect(port(s), "127.0.0.1", () => {
      sock.write(headOf(app, length));
      sock.write(bodyOf(length).subarray(0, length - 1), () => resolve(sock));
    });
    sock.on("error", reject);
  });
}

/**
 * The envelope of `send`, once it is a 429: a held body is reserved as the service reads it, which
 * the test cannot see but through a refusal (the attempts before it are bodies read and answered).
 */
async function untilRefused(send: () => Promise<{ code: number; message: string }>, what: string) {
  return pollUntil(send, (b) => b.code === 429, what);
}

const envelopeOf = (a: { body: Buffer }) =>
  JSON.parse(a.body.toString("utf8")) as { code: number; message: string };

/** A client that states `length` bytes and sends none: it holds nothing of the budget. */
function silent(s: TestServer, app: string, length: number): Promise<net.Socket> {
  return new Promise((resolve, reject) => {
    const sock = net.connect(port(s), "127.0.0.1", () => {
      sock.write(headOf(app, length), () => resolve(sock));
    });
    sock.on("error", reject);
  });
}

describe("request bodies in flight, per app and per node", () => {
  let server: TestServer;
  const open: net.Socket[] = [];
  before(async () => {
    server = await startServer({
      LIMIT_BODY_BYTES: String(MB),
      LIMIT_BODY_BYTES_IN_FLIGHT: String(3 * MB),
      LIMIT_BODY_BYTES_IN_FLIGHT_PER_APP: String(1.5 * MB),
    });
  });
  after(async () => {
    for (const s of open) s.destroy();
    await server.close();
  });

  it("an app's bodies past its share get 429 while another app's are read", async () => {
    const first = await held(server, "a", MB);
    open.push(first);
    const refusal = await untilRefused(
      async () =>
        envelopeOf(await rawRequest(port(server), headOf("a", 0.9 * MB), bodyOf(0.9 * MB), 30_000)),
      "app a's next body refused while its first is read",
    );
    assert.match(refusal.message, /LIMIT_BODY_BYTES_IN_FLIGHT_PER_APP/);
    // An operator sees the bytes held and the refusals, per budget.
    const metrics = await (await fetch(`${server.url}/metrics`)).text();
    const value = (name: string, budget: string) =>
      Number(new RegExp(`^${name}\\{budget="${budget}"\\} (\\S+)$`, "m").exec(metrics)?.[1] ?? NaN);
    assert.ok(value("sluice_budget_bytes", "body") >= 0.9 * MB, metrics);
    assert.ok(value("sluice_budget_refusals_total", "body") >= 1, metrics);
    for (const budget of ["answer", "download", "run"])
      assert.equal(value("sluice_budget_refusals_total", budget), 0, budget);
    assert.notEqual(await codeOf(server, "b", 0.9 * MB), 429, "another app's body is read");
    first.destroy();
    // Once the first request's connection is gone its bytes come back.
    await pollUntil(
      () => codeOf(server, "a", 0.9 * MB),
      (code) => code !== 429,
      "app a's body read again once its first request went",
    );
  });

  it("a body of unstated length is counted as it arrives", async () => {
    const first = await held(server, "c", MB);
    const chunk = bodyOf(0.9 * MB);
    const framed = Buffer.concat([
      Buffer.from(`${chunk.length.toString(16)}\r\n`),
      chunk,
      Buffer.from("\r\n0\r\n\r\n"),
    ]);
    const body = await untilRefused(
      async () =>
        envelopeOf(await rawRequest(port(server), headOf("c", "chunked"), framed, 30_000)),
      "app c's chunked body refused",
    );
    first.destroy();
    assert.match(body.message, /LIMIT_BODY_BYTES_IN_FLIGHT_PER_APP/);
  });

  it("a stated length that never comes holds nothing", async () => {
    for (let i = 0; i < 5; i++) open.push(await silent(server, "h", MB));
    assert.equal(await codeOf(server, "h", 0.9 * MB), 28010001, "the app's next body is read");
  });

  it("the node's bound holds over every app, and names its setting", async () => {
    for (const app of ["d", "e", "f"]) open.push(await held(server, app, MB));
    const body = await untilRefused(
      async () =>
        envelopeOf(await rawRequest(port(server), headOf("g", 0.9 * MB), bodyOf(0.9 * MB), 30_000)),
      "app g's body refused while three apps' are read",
    );
    assert.match(body.message, /LIMIT_BODY_BYTES_IN_FLIGHT \(3000000\)/);
    // A small body never waits on the budget.
    assert.notEqual(await codeOf(server, "g", 1000), 429);
  });
});

/** `body` sent chunked, in one chunk. */
const chunked = (body: Buffer) =>
  Buffer.concat([
    Buffer.from(`${body.length.toString(16)}\r\n`),
    body,
    Buffer.from("\r\n0\r\n\r\n"),
  ]);

const answerOf = (a: { body: Buffer }) =>
  JSON.parse(a.body.toString("utf8")) as { code: number; message: string };

describe("what one request reserves, with an app's share of one allowed body", () => {
  let server: TestServer;
  before(async () => {
    server = await startServer({
      LIMIT_BODY_BYTES: String(MB),
      LIMIT_BODY_BYTES_IN_FLIGHT: String(3 * MB),
      LIMIT_BODY_BYTES_IN_FLIGHT_PER_APP: String(MB),
    });
  });
  after(() => server.close());

  it("an allowed chunked body alone is read, whatever its length", async () => {
    // Counted in 64 KiB steps, a body within the last step of the limit reserved past it.
    const a = await rawRequest(
      port(server),
      headOf("a", "chunked"),
      chunked(bodyOf(0.99 * MB)),
      30_000,
    );
    assert.equal(answerOf(a).code, 28010001, JSON.stringify(answerOf(a)));
  });

  it("a gzip bomb refused at the body limit gives back all it reserved", async () => {
    // 58 KB that inflate to 60 MB: the parser refuses it at 1 MB (413) while the inflater still
    // empties what it buffered; what it counted after the answer was never given back.
    const bomb = gzipSync(Buffer.alloc(60 * MB, 0x20));
    for (let i = 0; i < 3; i++) {
      const a = await rawRequest(port(server), headOf("b", bomb.length, "gzip"), bomb, 30_000);
      assert.equal(answerOf(a).code, 413, JSON.stringify(answerOf(a)));
    }
    assert.equal(await codeOf(server, "b", 0.9 * MB), 28010001, "the app's next body is read");
  });
});

describe("bodies sent together by one app against a small heap", () => {
  it("the process lives: past the budget the bodies get 429", async () => {
    const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), "sluice-body-flood-"));
    const server = await startProcess({
      DATA_DIR: dataDir,
      NODE_OPTIONS: "--max-old-space-size=256",
      LIMIT_BODY_BYTES_IN_FLIGHT: String(48 * 2 ** 20),
      ...(await modeEnv()),
    });
    try {
      const body = JSON.stringify({
        elementName: "nope",
        parameter: Array.from({ length: 90_000 }, (_, i) => ({ i, note: "x".repeat(64) })),
      });
      const codes = await Promise.all(
        Array.from({ length: 40 }, () =>
          fetch(`${server.url}${DF}/run`, {
            method: "POST",
            headers: { "content-type": "application/json", ...SCOPE },
            body,
          })
            .then((r) => r.json() as Promise<{ code: number }>)
            .then((j) => j.code)
            .catch((err: unknown) => `${String(err)}: ${server.output().slice(-300)}`),
        ),
      );
      assert.equal(server.child.exitCode, null, server.output().slice(-1000));
      assert.ok(codes.includes(429), codes.join(", "));
      assert.ok(
        codes.every((c) => c === 429 || c === 28010001),
        `each body was refused or read: ${codes.join(", ")}`,
      );
      assert.equal((await fetch(`${server.url}/health`)).status, 200);
    } finally {
      await killHard(server.child);
      fs.rmSync(dataDir, { recursive: true, force: true });
    }
  });
});
