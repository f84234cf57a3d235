import assert from "node:assert/strict";
import http from "node:http";
import type { AddressInfo } from "node:net";
import { after, before, describe, it } from "node:test";
import { DF, deployAndActivate } from "../helpers/flows.ts";
import { scopeHeaders, startServer, type TestServer } from "../helpers/server.ts";
import { condition } from "../helpers/wait.ts";

/**
 * Error handlers' bot notifications (docs/error-handlers.md). Written as an attacker would: a
 * flow that fails at once, its bot a host that accepts and never answers, run many times. Before,
 * every failure opened its own connection for up to `WEBHOOK_TIMEOUT_MS` per attempt, however
 * many: a tenant failing runs fast held sockets (and file descriptors) without bound.
 */
const ATTACKER = { app: "evil", space: "s1", user: "mallory" } as const;
const SLOTS = 4;

/** Accepts POSTs; holds those under `/hold`, answers the others at once. */
async function startSink() {
  const changes = condition();
  const held: http.ServerResponse[] = [];
  const answered: string[] = [];
  const server = http.createServer((req, res) => {
    req.resume();
    req.on("end", () => {
      if (req.url === "/hold") held.push(res);
      else {
        answered.push(req.url ?? "");
        if (req.url === "/fail") res.statusCode = 500;
        res.end("{}");
      }
      changes.changed();
    });
  });
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    held,
    answered,
    changes,
    close: () =>
      new Promise<void>((resolve) => {
        for (const res of held.splice(0)) res.end("{}");
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

const failing = {
  vertexes: [
    { id: "in", type: "input" },
    {
      id: "t",
      type: "transform",
      config: { operators: [{ type: "expr", expr: "$error('boom')" }] },
    },
  ],
  edges: [{ source: "in", target: "t" }],
};

describe("a tenant's error-handler notifications to a host that never answers", () => {
  let server: TestServer;
  let sink: Awaited<ReturnType<typeof startSink>>;
  before(async () => {
    sink = await startSink();
    server = await startServer({
      ERROR_HANDLER_CONCURRENCY: String(SLOTS),
      ERROR_HANDLER_ATTEMPTS: "1",
      WEBHOOK_TIMEOUT_MS: "120000",
    });
    await deployAndActivate(
      server,
      "hog",
      failing,
      { errorHandlers: { bot: { webhookUrl: `${sink.url}/hold` } } },
      scopeHeaders(ATTACKER),
    );
    await deployAndActivate(server, "other", failing, {
      errorHandlers: { bot: { webhookUrl: `${sink.url}/other` } },
    });
  });
  after(async () => {
    await sink.close();
    await server.close();
  });

  it("hold at most the app's share of the node's slots, and another app's notification goes out", async () => {
    for (let i = 0; i < 30; i++) {
      const r = await server.call("POST", `${DF}/run-sync`, {
        headers: scopeHeaders(ATTACKER),
        body: { elementName: "hog", parameter: {} },
      });
      assert.equal(r.body.status, false, r.text);
    }
    // The attacker's share (half the slots) is taken, and no more.
    await sink.changes.until(
      () => sink.held.length >= SLOTS / 2,
      "the attacker's share held",
      30_000,
    );
    const r = await server.call("POST", `${DF}/run-sync`, {
      headers: scopeHeaders(),
      body: { elementName: "other", parameter: {} },
    });
    assert.equal(r.body.status, false);
    await sink.changes.until(
      () => sink.answered.length === 1,
      "the other app's notification",
      30_000,
    );
    assert.equal(sink.held.length, SLOTS / 2, `${sink.held.length} of the attacker's held at once`);
  });
});

describe("a mail handler's SMTP server that accepts and never greets", () => {
  it("fails the mail within WEBHOOK_TIMEOUT_MS, freeing its slot, not after nodemailer's own 30 s", async () => {
    const sockets: import("node:net").Socket[] = [];
    const net = await import("node:net");
    const smtp = net.createServer((s) => {
      sockets.push(s); // a connection accepted, then nothing: no greeting
      s.on("error", () => {});
    });
    await new Promise<void>((r) => smtp.listen(0, "127.0.0.1", r));
    const port = (smtp.address() as AddressInfo).port;
    const server = await startServer({
      SMTP_URL: `smtp://127.0.0.1:${port}`,
      WEBHOOK_TIMEOUT_MS: "500",
      ERROR_HANDLER_ATTEMPTS: "1",
    });
    try {
      await deployAndActivate(server, "mailed", failing, {
        errorHandlers: { email: { to: ["ops@example.com"] } },
      });
      const r = await server.call("POST", `${DF}/run-sync`, {
        headers: scopeHeaders(),
        body: { elementName: "mailed", parameter: {} },
      });
      const runId = r.headers.get("x-run-id") as string;
      const started = Date.now();
      // The run's end started its notification; idle() resolves once it is recorded.
      await server.services.errorHandlers.idle();
      const results = (
        await server.call("GET", `${DF}/monitor/run?runId=${runId}`, { headers: scopeHeaders() })
      ).body.data?.errorHandlerResults as { kind: string; ok: boolean }[];
      assert.equal(results[0]?.kind, "email");
      assert.equal(results[0]?.ok, false);
      assert.ok(Date.now() - started < 20_000, "failed within the bound, not nodemailer's 30 s");
    } finally {
      for (const s of sockets) s.destroy();
      smtp.close();
      await server.close();
    }
  });
});

describe("the backoff between a notification's attempts", () => {
  it("holds no slot: another notification of the app goes out meanwhile", async () => {
    const sink = await startSink();
    // One slot for the app; a failed attempt waits a minute before the next.
    const server = await startServer({
      ERROR_HANDLER_CONCURRENCY: "2",
      ERROR_HANDLER_ATTEMPTS: "2",
      ERROR_HANDLER_BACKOFF_MS: "60000",
    });
    try {
      await deployAndActivate(server, "down", failing, {
        errorHandlers: { bot: { webhookUrl: `${sink.url}/fail` } },
      });
      for (let i = 0; i < 2; i++)
        await server.call("POST", `${DF}/run-sync`, {
          headers: scopeHeaders(),
          body: { elementName: "down", parameter: {} },
        });
      // Both first attempts are made, the first's backoff under way.
      await sink.changes.until(() => sink.answered.length === 2, "both first attempts", 30_000);
    } finally {
      await sink.close();
      await server.close();
    }
  });
});
