import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { isPrivateAddress } from "../../src/private-address.ts";
import { checkAddress } from "../../src/runs/error-handlers/bot.ts";

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
      await assert.rejects(checkAddress(url, "en"), /private or loopback/, u);
    }
  });

  it("reads an address with a zone as the address", () => {
    assert.equal(isPrivateAddress("fe80::1%eth0"), true);
  });

  it("lets public addresses through", async () => {
    for (const u of PUBLIC) {
      const url = new URL(u);
      assert.equal(isPrivateAddress(url.hostname.replace(/^\[|\]$/g, "")), false, u);
      await checkAddress(url, "en");
    }
  });
});
