import assert from "node:assert/strict";
import http from "node:http";
import type { AddressInfo } from "node:net";
import net from "node:net";
import { after, before, describe, it } from "node:test";
import Fastify from "fastify";
import { createByteBudget } from "../../src/byte-budget.ts";
import { installAnswerBudget } from "../../src/http/answer-budget.ts";
import { DF } from "../helpers/flows.ts";
import { SCOPE, startServer, type TestServer } from "../helpers/server.ts";

/**
 * What an answer that does not fit LIMIT_ANSWER_BYTES_IN_FLIGHT is replaced with
 * (docs/errors.md, "Bad input"): its size is counted in bytes, a run-sync's refusal says that
 * its run ended, and the audit trail records a change as it happened.
 */
const MiB = 2 ** 20;

describe("an answer's size", () => {
  it("is counted in bytes, not UTF-16 units", async () => {
    const app = Fastify();
    installAnswerBudget(
      app,
      createByteBudget({
        total: 150_000,
        perApp: 150_000,
        what: "answers not yet read",
        totalSetting: "LIMIT_ANSWER_BYTES_IN_FLIGHT",
        perAppSetting: "LIMIT_ANSWER_BYTES_IN_FLIGHT_PER_APP",
      }),
    );
    // 60,000 characters of three bytes each: 180 kB written.
    app.get("/cjk", async (_req, reply) =>
      reply.type("application/json").send(JSON.stringify("中".repeat(60_000))),
    );
    const r = await app.inject({ method: "GET", url: "/cjk" });
    const body = r.json() as { code?: number; message?: string };
    assert.equal(body.code, 429, "180 kB do not fit 150 kB");
    assert.match(body.message ?? "", /LIMIT_ANSWER_BYTES_IN_FLIGHT/);
    await app.close();
  });
});

describe("a refused answer of a request that changed something", () => {
  let server: TestServer;
  let source: http.Server;
  const unread: net.Socket[] = [];
  let runId = "";
  const headers = { "content-type": "application/json", ...SCOPE };
  before(async () => {
    const big = JSON.stringify(
      Array.from({ length: 200_000 }, (_, i) => ({ i, n: "x".repeat(48) })),
    );
    source = http.createServer((_req, res) => {
      res.setHeader("content-type", "application/json");
      res.end(big);
    });
    await new Promise<void>((r) => source.listen(0, "127.0.0.1", () => r()));
    const bigUrl = `http://127.0.0.1:${(source.address() as AddressInfo).port}/big`;
    // The smallest bound these limits allow: LIMIT_BODY_BYTES + 2 × LIMIT_RESULT_BYTES.
    server = await startServer({
      FLOW_HTTP_ALLOW_PRIVATE: "true",
      LIMIT_BODY_BYTES: String(8 * MiB),
      LIMIT_RESULT_BYTES: String(16 * MiB),
      LIMIT_ANSWER_BYTES_IN_FLIGHT: String(40 * MiB),
    });
    const flow = {
      vertexes: [
        { id: "in", type: "input" },
        { id: "big", type: "http", config: { url: bigUrl } },
        { id: "out", type: "output" },
      ],
      edges: [
        { source: "in", target: "big" },
        { source: "big", target: "out" },
      ],
    };
    const d = await server.call("POST", `${DF}/flow/deploy`, {
      headers,
      body: {
        elementName: "big",
        revisionName: "r",
        path: "/",
        flow,
        configure: { logContent: "CONCISE" },
      },
    });
    assert.equal(d.body.status, true, d.text);
    await server.call("POST", `${DF}/flow/activate`, { headers, body: { elementName: "big" } });
    const ran = await server.call("POST", `${DF}/run-sync`, {
      headers,
      body: { elementName: "big", parameter: {} },
    });
    assert.equal(ran.body.status, true, ran.text.slice(0, 300));
    runId = ran.headers.get("x-run-id") ?? "";
    // Three GETs of the 13 MiB result whose clients read nothing: the app's share is taken.
    const port = Number(new URL(server.url).port);
    const head = `GET ${DF}/run/${runId}/result HTTP/1.1\r\nHost: x\r\napp: ${SCOPE.app}\r\nspace: ${SCOPE.space}\r\nuser: ${SCOPE.user}\r\n\r\n`;
    for (let i = 0; i < 3; i++) {
      const s = net.connect(port, "127.0.0.1");
      s.on("error", () => {});
      const answered = new Promise<void>((r) => s.once("readable", () => r()));
      s.write(head);
      unread.push(s);
      await answered;
    }
  });
  after(async () => {
    for (const s of unread) s.destroy();
    await server.close();
    source.close();
  });

  it("a run-sync's refusal says that its run ended and names it", async () => {
    const r = await server.call("POST", `${DF}/run-sync`, {
      headers,
      body: { elementName: "big", parameter: {} },
    });
    assert.equal(r.body.code, 429, r.text.slice(0, 300));
    const id = r.headers.get("x-run-id") ?? "";
    assert.ok(id, "the run is named in x-run-id");
    assert.match(r.body.message, /LIMIT_ANSWER_BYTES_IN_FLIGHT/);
    assert.match(r.body.message, new RegExp(`carried out: run ${id} ended`));
  });

  it("the audit trail records the change as it happened", async () => {
    // A terminate whose answer (each ID given, echoed) is over 7 MB: refused, yet carried out.
    const runIds = Array.from({ length: 1000 }, (_, i) => `${i}-${"n".repeat(7000)}`);
    const r = await server.call("POST", `${DF}/run/terminate`, { headers, body: { runIds } });
    assert.equal(r.body.code, 429, r.text.slice(0, 300));
    const a = await server.call("GET", `${DF}/audit?pageSize=1&action=terminate`, { headers });
    const [entry] = a.body.data.entries;
    assert.equal(entry?.outcome, "success", JSON.stringify(entry).slice(0, 300));
    assert.equal(entry?.code, 0);
    assert.match(r.body.message, /carried out/);
  });
});
