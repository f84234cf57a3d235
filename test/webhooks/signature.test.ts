import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { describe, it } from "node:test";
import { sign, verify } from "../../src/webhooks/signature.ts";
import { parseOnList, runTargets, wants, webhookUrlProblem } from "../../src/webhooks/targets.ts";
import { verified } from "../helpers/webhook-receiver.ts";

const SECRET = "whsec_test";
const BODY = '{"runId":"r1","status":"SUCCESS"}';

describe("webhook signature", () => {
  it("signs t.body with HMAC-SHA256 and verifies within the window only", () => {
    const header = sign(SECRET, 1000, BODY);
    assert.match(header, /^t=1000,v1=[0-9a-f]{64}$/);
    assert.equal(verify(SECRET, header, BODY, 1100), true);
    assert.equal(verify(SECRET, header, `${BODY} `, 1100), false, "another body");
    assert.equal(verify("whsec_other", header, BODY, 1100), false, "another secret");
    assert.equal(verify(SECRET, header, BODY, 1000 + 301), false, "too old");
    assert.equal(verified(SECRET, header, BODY, 1100), true, "the documented Node lines");
  });

  it("is verified by the documented Python lines", () => {
    const header = sign(SECRET, Math.floor(Date.now() / 1000), BODY);
    const py = [
      "import hmac, hashlib, time, sys",
      "secret, raw_body = sys.argv[1], sys.argv[3].encode()",
      "headers = {'sluice-signature': sys.argv[2]}",
      'parts = dict(kv.split("=", 1) for kv in headers["sluice-signature"].split(","))',
      "mac = hmac.new(secret.encode(), f\"{parts['t']}.\".encode() + raw_body, hashlib.sha256).hexdigest()",
      'ok = hmac.compare_digest(mac, parts.get("v1", "")) and abs(time.time() - int(parts["t"])) < 300',
      "print(ok)",
    ].join("\n");
    const run = (body: string) =>
      execFileSync("/usr/bin/python3", ["-c", py, SECRET, header, body], {
        encoding: "utf8",
      }).trim();
    assert.equal(run(BODY), "True");
    assert.equal(run(`${BODY}x`), "False");
  });
});

describe("webhook targets", () => {
  it("accepts absolute http(s) URLs only", () => {
    assert.equal(webhookUrlProblem("https://example.com/a?b=1"), null);
    assert.equal(webhookUrlProblem("http://127.0.0.1:9/x"), null);
    assert.match(webhookUrlProblem("ftp://example.com") ?? "", /http or https.*ftp/);
    assert.match(webhookUrlProblem("/relative") ?? "", /absolute/);
  });

  it("matches run ends by on, ANY and no list meaning every end", () => {
    assert.equal(wants({ url: "u", on: ["FAILURE"] }, "FAILURE"), true);
    assert.equal(wants({ url: "u", on: ["FAILURE"] }, "SUCCESS"), false);
    assert.equal(wants({ url: "u", on: ["ANY"] }, "CANCELED"), true);
    assert.equal(wants({ url: "u", on: [] }, "SUCCESS"), true);
  });

  it("reads a query's comma list and names an unknown value", () => {
    assert.deepEqual(parseOnList("success, FAILURE"), ["SUCCESS", "FAILURE"]);
    assert.deepEqual(parseOnList("SUCCESS,LATER"), { unknown: "LATER" });
  });

  it("records the configured URLs first, then the call's, and null for none", () => {
    const conf = [{ url: "a", on: ["ANY" as const] }];
    const call = { url: "b", on: ["SUCCESS" as const] };
    assert.deepEqual(runTargets(conf, call), [...conf, call]);
    assert.equal(runTargets([], undefined), null);
  });
});
