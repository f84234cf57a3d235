import assert from "node:assert/strict";
import http from "node:http";
import type { AddressInfo } from "node:net";
import { describe, it } from "node:test";
import { type GuardedPost, postGuarded } from "../../src/guarded-post.ts";
import { isPrivateAddress } from "../../src/private-address.ts";

class Refused extends Error {}

const post = (url: URL, more: Partial<GuardedPost> = {}) =>
  postGuarded({
    url,
    headers: {},
    body: "{}",
    signal: AbortSignal.timeout(2000),
    allowPrivate: false,
    maxAnswerBytes: 1024,
    refuse: (host) => new Refused(`${host} is private or loopback`),
    ...more,
  });

/** Hosts as `new URL` normalises them: `[::ffff:127.0.0.1]` becomes `[::ffff:7f00:1]`. */
const PRIVATE = [
  "http://127.0.0.1/",
  "http://169.254.169.254/latest/meta-data/",
  "http://[::1]/",
  "http://[::ffff:127.0.0.1]/",
  "http://[::ffff:169.254.169.254]/",
  "http://[::ffff:10.0.0.1]/",
  "http://[::127.0.0.1]/",
  "http://[::ffff:0:127.0.0.1]/",
  "http://[64:ff9b::169.254.169.254]/",
  "http://[2002:7f00:1::]/",
  "http://[fe80::1]/",
  "http://[fec0::1]/",
  "http://[fd00::1]/",
  "http://[ff02::1]/",
  "http://0.0.0.0/",
  "http://100.64.0.1/",
  "http://198.18.0.1/",
  "http://224.0.0.1/",
  "http://255.255.255.255/",
  "http://2130706433/",
  "http://0x7f.1/",
];
const PUBLIC = [
  "http://93.184.215.14/",
  "http://[2606:4700::6810:84e5]/",
  "http://[::ffff:93.184.215.14]/",
];

describe("private addresses (WEBHOOK_ALLOW_PRIVATE=false)", () => {
  it("refuses loopback, private, link-local and metadata addresses in every IPv4 and IPv6 form", async () => {
    for (const u of PRIVATE) {
      const url = new URL(u);
      assert.equal(
        isPrivateAddress(url.hostname.replace(/^\[|\]$/g, "")),
        true,
        `${u} (${url.hostname})`,
      );
      await assert.rejects(post(url), Refused, u);
    }
  });

  it("reads an address with a zone as the address", () => {
    assert.equal(isPrivateAddress("fe80::1%eth0"), true);
  });

  it("lets public addresses through", () => {
    for (const u of PUBLIC) {
      const url = new URL(u);
      assert.equal(isPrivateAddress(url.hostname.replace(/^\[|\]$/g, "")), false, u);
    }
  });

  it("checks the address it connects to: a name is resolved once (no DNS rebinding)", async () => {
    let received = 0;
    const server = http.createServer((req, res) => {
      received++;
      req.resume();
      res.end("ok");
    });
    await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
    const port = (server.address() as AddressInfo).port;
    try {
      // A name that answers loopback is refused, and nothing reaches the loopback server.
      const loopback = async () => [{ address: "127.0.0.1", family: 4 }];
      await assert.rejects(
        post(new URL(`http://rebind.test:${port}/`), { resolve: loopback }),
        Refused,
      );
      // A name that answers a public address first and loopback after: the connection goes where
      // the checked answer points (here nowhere reachable), never to a second answer.
      let calls = 0;
      const rebinding = async () =>
        calls++ === 0
          ? [{ address: "192.0.2.1", family: 4 }]
          : [{ address: "127.0.0.1", family: 4 }];
      await assert.rejects(
        post(new URL(`http://rebind.test:${port}/`), {
          resolve: rebinding,
          signal: AbortSignal.timeout(300),
        }),
      );
      assert.equal(calls, 1, "the name was resolved more than once");
      assert.equal(received, 0, "the loopback server was reached");
      // Allowed private addresses connect as usual.
      const ok = await post(new URL(`http://127.0.0.1:${port}/`), { allowPrivate: true });
      assert.deepEqual(ok, { status: 200, body: "ok" });
    } finally {
      server.close();
    }
  });
});
