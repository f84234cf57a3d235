import assert from "node:assert/strict";
import http from "node:http";
import type { AddressInfo } from "node:net";
import { after, before, describe, it } from "node:test";
import { outboundFetch } from "../../src/guarded-fetch.ts";
import { DF, deployAndActivate } from "../helpers/flows.ts";
import { scopeHeaders, startServer, type TestServer } from "../helpers/server.ts";

class Refused extends Error {}

/**
 * A tenant's http node against the service's own machine and network (docs/flow-graph.md,
 * `FLOW_HTTP_ALLOW_PRIVATE=false`): the attack is a flow aimed at loopback, directly or through a
 * name; nothing is reached. Every connection these tests could make goes to loopback or to the
 * documentation range (192.0.2.0/24, never routed): were the guard broken, no byte would leave
 * the machine. Which other ranges count as private is `isPrivateAddress`'s, tested with the
 * webhooks (test/webhooks/private-address.test.ts).
 */
describe("http nodes and private addresses", () => {
  let received = 0;
  let port = 0;
  const receiver = http.createServer((req, res) => {
    received++;
    req.resume();
    res.setHeader("content-type", "application/json");
    res.end('{"secret":"internal"}');
  });
  before(async () => {
    await new Promise<void>((r) => receiver.listen(0, "127.0.0.1", r));
    port = (receiver.address() as AddressInfo).port;
  });
  after(() => receiver.close());

  const guarded = (resolve?: (host: string) => Promise<{ address: string; family: number }[]>) =>
    outboundFetch({
      allowPrivate: false,
      refuse: (host) => new Refused(`${host} refused`),
      ...(resolve ? { resolve } : {}),
    });

  it("refuses address literals and names that resolve to them, before any byte is sent", async () => {
    const f = guarded();
    for (const url of [
      `http://127.0.0.1:${port}/`,
      `http://[::1]:${port}/`,
      `http://[::ffff:127.0.0.1]:${port}/`,
      `http://2130706433:${port}/`,
      `http://localhost:${port}/`,
    ]) {
      const err = await f(url, { signal: AbortSignal.timeout(5000) }).then(
        () => assert.fail(`${url} was fetched`),
        (e: unknown) => e,
      );
      assert.ok(err instanceof TypeError && err.cause instanceof Refused, `${url}: ${err}`);
    }
    // A name that answers a public address and a loopback one is refused as a whole.
    const mixed = guarded(async () => [
      { address: "192.0.2.1", family: 4 },
      { address: "127.0.0.1", family: 4 },
    ]);
    await assert.rejects(mixed(`http://mixed.test:${port}/`), (e: unknown) => {
      return e instanceof TypeError && e.cause instanceof Refused;
    });
    assert.equal(received, 0, "the loopback server was reached");
  });

  it("reaches an address it allows, and refuses a redirect from there to one it does not", async () => {
    // 127.0.0.1 stands for a public address here; 127.0.0.2 keeps counting as private.
    let inner = 0;
    const internal = http.createServer((req, res) => {
      inner++;
      req.resume();
      res.end("internal");
    });
    await new Promise<void>((r) => internal.listen(0, "127.0.0.2", r));
    const innerPort = (internal.address() as AddressInfo).port;
    const outer = http.createServer((req, res) => {
      req.resume();
      if (req.url === "/hop") {
        res.writeHead(302, { location: `http://127.0.0.2:${innerPort}/` }).end();
        return;
      }
      res.setHeader("content-type", "application/json");
      res.end('{"public":true}');
    });
    await new Promise<void>((r) => outer.listen(0, "127.0.0.1", r));
    const outerPort = (outer.address() as AddressInfo).port;
    try {
      const f = outboundFetch({
        allowPrivate: false,
        refuse: (host) => new Refused(`${host} refused`),
        resolve: async () => [{ address: "127.0.0.1", family: 4 }],
        blocked: (address) => address !== "127.0.0.1",
      });
      const ok = await f(`http://public.test:${outerPort}/`);
      assert.deepEqual(await ok.json(), { public: true }, "through the guarded connector");
      const hop = await f(`http://127.0.0.1:${outerPort}/hop`).then(
        () => assert.fail("the redirect was followed"),
        (e: unknown) => e,
      );
      assert.ok(hop instanceof TypeError && hop.cause instanceof Refused, String(hop));
      assert.equal(inner, 0, "the redirect's target was reached");
    } finally {
      internal.close();
      outer.close();
    }
  });

  it("allowed (the default), the same call goes through", async () => {
    const f = outboundFetch({ allowPrivate: true, refuse: (h) => new Refused(h) });
    const res = await f(`http://127.0.0.1:${port}/`);
    assert.deepEqual(await res.json(), { secret: "internal" });
    assert.equal(received, 1);
    received = 0;
  });

  describe("over HTTP, with FLOW_HTTP_ALLOW_PRIVATE=false", () => {
    let server: TestServer;
    before(async () => {
      server = await startServer({ FLOW_HTTP_ALLOW_PRIVATE: "false" });
    });
    after(() => server.close());

    it("a flow's http node aimed at loopback fails the run, naming why, and reaches nothing", async () => {
      for (const [name, url] of [
        ["to-loopback", `http://127.0.0.1:${port}/admin`],
        ["to-localhost", `http://localhost:${port}/admin`],
        ["to-v6-loopback", `http://[::1]:${port}/admin`],
      ]) {
        await deployAndActivate(server, name as string, {
          vertexes: [
            { id: "in", type: "input" },
            { id: "call", type: "http", config: { url } },
          ],
          edges: [{ source: "in", target: "call" }],
        });
        const r = await server.call("POST", `${DF}/run-sync`, {
          headers: scopeHeaders(),
          body: { elementName: name, parameter: {} },
        });
        const run = await server.services.store.getRun(null, r.headers.get("x-run-id") ?? "");
        assert.equal(run?.status, "FAILURE", JSON.stringify(r.body));
        assert.match(
          run?.error ?? "",
          /loopback or private address \(FLOW_HTTP_ALLOW_PRIVATE=false\)/,
        );
        assert.doesNotMatch(JSON.stringify(r.body), /internal/);
      }
      assert.equal(received, 0, "the loopback server was reached");
    });
  });
});
