import assert from "node:assert/strict";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { after, before, describe, it } from "node:test";
import { DF, deployAndActivate, NO_SCRIPT_FLOW } from "../helpers/flows.ts";
import {
  modeEnv,
  OTHER_SCOPE,
  scopeHeaders,
  startServer,
  type TestServer,
  upload,
} from "../helpers/server.ts";
import { type Receiver, startReceiver, verified } from "../helpers/webhook-receiver.ts";

const H = scopeHeaders();
const ORDERS = { orders: [{ amount: 2, qty: 3 }] };
const BOOM_FLOW = {
  vertexes: [
    { id: "in", type: "input" },
    { id: "py", type: "script", config: { code: "def main(p):\n    raise ValueError('boom')\n" } },
  ],
  edges: [{ source: "in", target: "py" }],
};
const nowS = () => Math.floor(Date.now() / 1000);

async function secretOf(server: TestServer, headers = H): Promise<string> {
  const r = await server.call("GET", `${DF}/webhook/secret`, { headers });
  assert.equal(r.body.status, true, r.text);
  return r.body.data.secret;
}

async function runDetail(server: TestServer, runId: string) {
  const r = await server.call("GET", `${DF}/monitor/run?runId=${runId}`, { headers: H });
  assert.equal(r.body.status, true, r.text);
  return r.body.data;
}

describe("completion webhooks", () => {
  let server: TestServer;
  let rx: Receiver;

  before(async () => {
    rx = await startReceiver();
    server = await startServer({ WEBHOOK_BACKOFF_MS: "20", WEBHOOK_INLINE_RESULT_BYTES: "200" });
    await deployAndActivate(server, "orders", NO_SCRIPT_FLOW, {
      webhooks: [
        { url: `${rx.url}/conf-success`, on: ["SUCCESS"] },
        { url: `${rx.url}/conf-failure`, on: ["FAILURE"] },
      ],
    });
    await deployAndActivate(server, "boom", BOOM_FLOW, {
      webhooks: [{ url: `${rx.url}/boom` }],
    });
  });
  after(async () => {
    await server.close();
    await rx.close();
  });

  it("POSTs one signed delivery per matching URL when a run ends, listed in the run's detail", async () => {
    const from = rx.received.length;
    const r = await server.call("POST", `${DF}/run-sync`, {
      headers: H,
      body: { elementName: "orders", parameter: ORDERS, callbackUrl: `${rx.url}/call` },
    });
    assert.equal(r.body.status, true, r.text);
    const runId = r.headers.get("x-run-id") ?? "";
    await rx.cond.until(() => rx.received.length >= from + 2, "two deliveries");
    await server.services.webhooks.idle();
    const got = rx.received.slice(from);
    assert.deepEqual(got.map((x) => x.path).sort(), ["/call", "/conf-success"]);
    const secret = await secretOf(server);
    for (const x of got) {
      assert.ok(verified(secret, String(x.headers["sluice-signature"]), x.body, nowS()), x.body);
      assert.equal(x.json.runId, runId);
      assert.equal(x.json.status, "SUCCESS");
      assert.equal(x.json.elementName, "orders");
      assert.equal(x.json.revision, "1");
      assert.deepEqual(x.json.result, r.body.data);
      assert.equal(x.json.error, null);
      assert.ok(x.json.endTime >= x.json.startTime);
      assert.equal(x.headers["sluice-delivery"], x.json.deliveryId);
    }
    const detail = await runDetail(server, runId);
    assert.equal(detail.webhookDeliveries.length, 2);
    for (const d of detail.webhookDeliveries) {
      assert.equal(d.status, "DELIVERED");
      assert.equal(d.attempts.length, 1);
      assert.equal(d.attempts[0].httpStatus, 200);
    }
  });

  it("calls FAILURE and ANY webhooks of a failed run, not SUCCESS ones", async () => {
    const from = rx.received.length;
    const r = await server.call("POST", `${DF}/run-sync`, {
      headers: H,
      body: {
        elementName: "boom",
        parameter: {},
        callbackUrl: `${rx.url}/call-success-only`,
        callbackOn: ["SUCCESS"],
      },
    });
    assert.equal(r.body.status, false, r.text);
    await rx.cond.until(() => rx.received.length >= from + 1, "the failure delivery");
    await server.services.webhooks.idle();
    const got = rx.received.slice(from);
    assert.deepEqual(
      got.map((x) => x.path),
      ["/boom"],
    );
    assert.equal(got[0]?.json.status, "FAILURE");
    assert.match(got[0]?.json.error, /boom/);
  });

  it("retries a failing receiver with backoff: one success, every attempt listed", async () => {
    rx.answer = (p, attempt) => (p === "/flaky" && attempt < 3 ? 503 : 200);
    const r = await server.call("POST", `${DF}/run`, {
      headers: H,
      body: { elementName: "orders", parameter: ORDERS, callbackUrl: `${rx.url}/flaky` },
    });
    const runId = r.body.data as string;
    await rx.cond.until(
      () => rx.received.some((x) => x.path === "/flaky" && x.answered === 200),
      "the third attempt",
    );
    await server.services.webhooks.idle();
    const calls = rx.received.filter((x) => x.path === "/flaky");
    assert.deepEqual(
      calls.map((x) => x.answered),
      [503, 503, 200],
    );
    const detail = await runDetail(server, runId);
    const d = detail.webhookDeliveries.find((x: { url: string }) => x.url.endsWith("/flaky"));
    assert.equal(d.status, "DELIVERED");
    assert.deepEqual(
      d.attempts.map((a: { httpStatus: number }) => a.httpStatus),
      [503, 503, 200],
    );
    rx.answer = () => 200;
  });

  it("calls a script task's callbackUrl with its result", async () => {
    await upload(server, [{ name: "echo.py", content: "def main(p):\n    return p\n" }], {
      path: "/s",
    });
    const from = rx.received.length;
    const r = await server.call("POST", "/script/script/run-sync", {
      headers: H,
      body: { elementName: "echo", parameter: { n: 7 }, callbackUrl: `${rx.url}/task` },
    });
    assert.equal(r.body.status, true, r.text);
    await rx.cond.until(() => rx.received.length > from, "the task's delivery");
    const x = rx.received[from];
    assert.equal(x?.path, "/task");
    assert.equal(x?.json.runId, r.headers.get("x-task-id"));
    assert.equal(x?.json.elementType, "PY");
    assert.deepEqual(x?.json.result, { n: 7 });
  });

  it("sends a result over the limit as its size and a link to the result endpoint", async () => {
    const big = { orders: Array.from({ length: 50 }, (_, i) => ({ amount: i + 1, qty: 1 })) };
    const from = rx.received.length;
    const r = await server.call("POST", `${DF}/run-sync`, {
      headers: H,
      body: { elementName: "orders", parameter: big, callbackUrl: `${rx.url}/big` },
    });
    await rx.cond.until(() => rx.received.slice(from).some((x) => x.path === "/big"), "big");
    const x = rx.received.slice(from).find((y) => y.path === "/big");
    assert.equal(x?.json.result, undefined);
    assert.equal(x?.json.resultSize, Buffer.byteLength(JSON.stringify(r.body.data)));
    const linked = await server.call("GET", x?.json.resultUrl, { headers: H });
    assert.deepEqual(linked.body.data, r.body.data);
  });

  it("refuses a callbackUrl that is not http(s) with a 400 naming the field", async () => {
    const bad = await server.call("POST", `${DF}/run`, {
      headers: H,
      body: { elementName: "orders", parameter: ORDERS, callbackUrl: "ftp://example.com/x" },
    });
    assert.equal(bad.body.code, 400, bad.text);
    assert.match(bad.body.message, /body\.callbackUrl/);
    const on = await server.call("POST", `${DF}/run-sync`, {
      headers: H,
      body: { elementName: "orders", parameter: ORDERS, callbackUrl: rx.url, callbackOn: ["DONE"] },
    });
    assert.equal(on.body.code, 400, on.text);
    assert.match(on.body.message, /callbackOn/);
    const script = await server.call("POST", "/script/script/run", {
      headers: H,
      body: { elementName: "none", callbackUrl: "not a url" },
    });
    assert.equal(script.body.code, 400, script.text);
    assert.match(script.body.message, /body\.callbackUrl/);
    const external = await server.call(
      "POST",
      "/script/external/none/run?callbackUrl=http%3A%2F%2Fx&callbackOn=SUCCESS,LATER",
      { headers: H, body: {} },
    );
    assert.equal(external.body.code, 400, external.text);
    assert.match(external.body.message, /querystring\.callbackOn.*LATER/);
  });

  it("refuses a deploy whose configure.webhooks names a bad URL or status", async () => {
    const d = await server.call("POST", `${DF}/flow/deploy`, {
      headers: H,
      body: {
        elementName: "bad-hooks",
        revisionName: "r1",
        path: "/flows",
        flow: NO_SCRIPT_FLOW,
        configure: { webhooks: [{ url: "file:///etc/passwd" }, { url: rx.url, on: ["LATER"] }] },
      },
    });
    const errors = (d.body.data as { severity: number; path: unknown[] }[]).filter(
      (p) => p.severity === 2,
    );
    assert.deepEqual(errors.map((e) => e.path.slice(0, 3)).sort(), [
      ["configure", "webhooks", 0],
      ["configure", "webhooks", 1],
    ]);
  });

  it("gives each space its own signing secret, rotated on request", async () => {
    const mine = await secretOf(server);
    assert.equal(await secretOf(server), mine);
    const other = await secretOf(server, scopeHeaders(OTHER_SCOPE));
    assert.notEqual(other, mine);
    const rotated = await server.call("POST", `${DF}/webhook/secret/rotate`, {
      headers: scopeHeaders(OTHER_SCOPE),
    });
    assert.notEqual(rotated.body.data.secret, other);
    assert.equal(await secretOf(server, scopeHeaders(OTHER_SCOPE)), rotated.body.data.secret);
    assert.equal(await secretOf(server), mine);
  });
});

/** Deploys the orders flow on `server` and runs it once with a callback to `rx` at `at`. */
async function ordersRunWithCallback(
  server: TestServer,
  rx: { url: string },
  at: string,
): Promise<string> {
  await deployAndActivate(server, "orders", NO_SCRIPT_FLOW);
  const r = await server.call("POST", `${DF}/run-sync`, {
    headers: H,
    body: { elementName: "orders", parameter: ORDERS, callbackUrl: `${rx.url}${at}` },
  });
  return r.headers.get("x-run-id") ?? "";
}

/** Settings for two lives of one service whose deliveries retry fast. */
async function restartEnv(): Promise<Record<string, string>> {
  return { ...(await modeEnv()), WEBHOOK_BACKOFF_MS: "30", WEBHOOK_MAX_BACKOFF_MS: "60" };
}

describe("completion webhooks across a restart", () => {
  it("delivers exactly once when the service restarts in the middle of retries", async () => {
    const rx = await startReceiver();
    const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), "sluice-hooks-"));
    // The same database for both lives: the data directory, or the same PostgreSQL database.
    const env = await restartEnv();
    let healed = false;
    rx.answer = () => (healed ? 200 : 500);
    const first = await startServer(env, { dataDir, keepData: true });
    let runId = "";
    try {
      runId = await ordersRunWithCallback(first, rx, "/restart");
      await rx.cond.until(() => rx.received.length >= 2, "two failed attempts");
    } finally {
      await first.close();
    }
    const failed = rx.received.length;
    healed = true;
    const second = await startServer(env, { dataDir });
    try {
      await rx.cond.until(() => rx.received.some((x) => x.answered === 200), "the delivery");
      await second.services.webhooks.idle();
      assert.deepEqual([...rx.successes().values()], [1]);
      assert.equal(rx.received.length, failed + 1);
      const secret = await secretOf(second);
      for (const x of rx.received)
        assert.ok(verified(secret, String(x.headers["sluice-signature"]), x.body, nowS()));
      assert.equal(new Set(rx.received.map((x) => x.body)).size, 1, "every attempt, one body");
      const [d] = (await runDetail(second, runId)).webhookDeliveries;
      assert.equal(d.status, "DELIVERED");
      assert.equal(d.attempts.length, failed + 1);
    } finally {
      await second.close();
      await rx.close();
    }
  });
});

describe("completion webhooks of deleted runs", () => {
  it("deletes a deleted run's finished deliveries with it: the outbox does not grow without bound", async () => {
    const rx = await startReceiver();
    const server = await startServer({});
    try {
      const runId = await ordersRunWithCallback(server, rx, "/gone");
      await rx.cond.until(() => rx.received.length === 1, "the delivery");
      await server.services.webhooks.idle();
      assert.equal((await server.services.webhooks.deliveriesOf(runId)).length, 1);
      const del = await server.call("POST", `${DF}/run/delete`, {
        headers: H,
        body: { runIds: [runId] },
      });
      assert.deepEqual(del.body.data, { [runId]: true }, del.text);
      assert.deepEqual(await server.services.webhooks.deliveriesOf(runId), []);
    } finally {
      await server.close();
      await rx.close();
    }
  });

  it("still delivers a pending delivery of a deleted run, and prunes it at the next start", async () => {
    const rx = await startReceiver();
    const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), "sluice-hooks-"));
    const env = await restartEnv();
    let deleted = false;
    rx.answer = () => (deleted ? 200 : 500);
    const first = await startServer(env, { dataDir, keepData: true });
    let runId = "";
    try {
      runId = await ordersRunWithCallback(first, rx, "/later");
      await rx.cond.until(() => rx.received.length >= 1, "a failed attempt");
      await first.call("POST", `${DF}/run/delete`, { headers: H, body: { runIds: [runId] } });
      deleted = true;
      await rx.cond.until(() => rx.received.some((x) => x.answered === 200), "the delivery");
      await first.services.webhooks.idle();
      assert.equal((await first.services.webhooks.deliveriesOf(runId))[0]?.status, "DELIVERED");
    } finally {
      await first.close();
    }
    const second = await startServer(env, { dataDir });
    try {
      assert.deepEqual(await second.services.webhooks.deliveriesOf(runId), []);
    } finally {
      await second.close();
      await rx.close();
    }
  });
});
