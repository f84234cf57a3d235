import assert from "node:assert/strict";
import http from "node:http";
import type { AddressInfo } from "node:net";
import { after, before, describe, it } from "node:test";
import { DF, deployAndActivate, NO_SCRIPT_FLOW } from "../helpers/flows.ts";
import { scopeHeaders, startServer, type TestServer } from "../helpers/server.ts";
import { type Condition, condition } from "../helpers/wait.ts";
import { type Receiver, startReceiver } from "../helpers/webhook-receiver.ts";

const ORDERS = { orders: [{ amount: 2, qty: 3 }] };
const HOG = scopeHeaders({ app: "hog", space: "s", user: "mallory" });
const VICTIM = scopeHeaders({ app: "victim", space: "s", user: "alice" });

/** A receiver that takes every request and never answers, until it is closed. */
interface Tarpit {
  url: string;
  held: number;
  cond: Condition;
  close(): Promise<void>;
}

async function startTarpit(): Promise<Tarpit> {
  const cond = condition();
  const server = http.createServer(() => {
    t.held++;
    cond.changed();
  });
  const t: Tarpit = {
    url: "",
    held: 0,
    cond,
    close: () =>
      new Promise<void>((done) => {
        server.closeAllConnections();
        server.close(() => done());
      }),
  };
  await new Promise<void>((done) => server.listen(0, "127.0.0.1", done));
  t.url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  return t;
}

// Attack (docs/webhooks.md, "Fairness between apps"): the delivery worker is shared by every app
// of a node. An app whose receiver never answers, and whose runs end faster than its attempts
// time out, held every attempt slot for WEBHOOK_TIMEOUT_MS and then again for its retries, so
// another app's delivery waited behind the whole backlog (minutes to hours).
describe("webhook deliveries: one app's silent receiver does not hold back another app's", () => {
  let server: TestServer;
  let tarpit: Tarpit;
  let rx: Receiver;

  before(async () => {
    tarpit = await startTarpit();
    rx = await startReceiver();
    server = await startServer({ WEBHOOK_CONCURRENCY: "4", WEBHOOK_TIMEOUT_MS: "120000" });
    await deployAndActivate(server, "orders", NO_SCRIPT_FLOW, {}, HOG);
    await deployAndActivate(server, "orders", NO_SCRIPT_FLOW, {}, VICTIM);
  });
  after(async () => {
    // The attempts under way end when the tarpit drops them; the service's stop awaits them.
    await tarpit.close();
    await server.close();
    await rx.close();
  });

  it("the other app's delivery is made while the hog's attempts hang, and the hog holds at most its share", async () => {
    for (let i = 0; i < 8; i++) {
      const r = await server.call("POST", `${DF}/run-sync`, {
        headers: HOG,
        body: { elementName: "orders", parameter: ORDERS, callbackUrl: `${tarpit.url}/hold` },
      });
      assert.equal(r.body.status, true, r.text);
    }
    // The default share is half of WEBHOOK_CONCURRENCY: 2 of 4 attempts under way.
    await tarpit.cond.until(() => tarpit.held >= 2, "the hog's attempts under way", 60_000);
    const r = await server.call("POST", `${DF}/run-sync`, {
      headers: VICTIM,
      body: { elementName: "orders", parameter: ORDERS, callbackUrl: `${rx.url}/victim` },
    });
    assert.equal(r.body.status, true, r.text);
    await rx.cond.until(
      () => rx.received.some((x) => x.path === "/victim"),
      "the victim's delivery, long before the hog's attempts time out (120 s)",
      60_000,
    );
    assert.equal(tarpit.held, 2, "attempts of the hog under way at once");
  });
});
