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
 * `FLOW_HTTP_ALLOW_PRIVATE=false`): the attack is a flow aimed at loopback, link-local (cloud
 * metadata) and private addresses, directly or through a name; none of them is reached.
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
      "http://169.254.169.254/latest/meta-data/",
      "http://[::ffff:169.254.169.254]/",
      "http://10.0.0.1/",
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
      { address: "93.184.215.14", family: 4 },
      { address: "127.0.0.1", family: 4 },
    ]);
    await assert.rejects(mixed(`http://mixed.test:${port}/`), (e: unknown) => {
      return e instanceof TypeError && e.cause instanceof Refused;
    });
    assert.equal(received, 0, "the loopback server was reached");
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
        ["to-metadata", "http://169.254.169.254/latest/meta-data/"],
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
