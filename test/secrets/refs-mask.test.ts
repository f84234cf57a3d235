import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { parseHeader } from "../../src/scripts/script-header.ts";
import { maskCutText, maskDeep, maskOrder, maskOutcome, maskText } from "../../src/secrets/mask.ts";
import { secretNamesOfGraph, secretRefsOfConfig, splitSecretRefs } from "../../src/secrets/refs.ts";
import { substituteSecrets } from "../../src/secrets/substitute.ts";

const values = (m: Record<string, string>) => ({
  async values(names: readonly string[]) {
    const out = new Map<string, string>();
    for (const n of names) {
      const v = m[n];
      if (v === undefined) throw new Error(`secret ${n} does not exist in this space`);
      out.set(n, v);
    }
    return out;
  },
  handedOut: () => Object.values(m),
});

describe("secret references", () => {
  it("split a text around ${secret.NAME}", () => {
    assert.deepEqual(splitSecretRefs("Bearer ${secret.TOKEN}"), [
      { literal: "Bearer " },
      { secret: "TOKEN" },
    ]);
    assert.deepEqual(splitSecretRefs("plain {{x}}"), [{ literal: "plain {{x}}" }]);
    assert.deepEqual(splitSecretRefs(""), [{ literal: "" }]);
  });

  it("are found only in http url and header values and in script env", () => {
    const http = {
      url: "https://h/${secret.A}",
      headers: { x: "${secret.B}" },
      body: "${secret.C}",
    };
    assert.deepEqual(
      secretRefsOfConfig("http", http).map((r) => [r.path, r.name]),
      [
        [["url"], "A"],
        [["headers", "x"], "B"],
      ],
    );
    assert.deepEqual(
      secretRefsOfConfig("script", { code: "x", env: { K: "${secret.D}" } }).map((r) => r.name),
      ["D"],
    );
    const graph = { vertexes: [{ id: "h", type: "http", config: http }, null] };
    assert.deepEqual([...secretNamesOfGraph(graph)], ["A", "B"]);
  });

  it("substitute values and render only the literal pieces", async () => {
    const render = async (t: string) => t.replace("{{who}}", "bob");
    const out = await substituteSecrets("{{who}}:${secret.T}", values({ T: "{{who}}" }), render);
    assert.equal(out, "bob:{{who}}");
    await assert.rejects(substituteSecrets("${secret.NOPE}", values({})), /NOPE does not exist/);
    await assert.rejects(substituteSecrets("${secret.T}", undefined), /SECRETS_KEY/);
    assert.equal(await substituteSecrets("no refs", undefined), "no refs");
  });

  it("declared by a PY element in a sluice-secrets comment", () => {
    const src =
      "# sluice-secrets: API_TOKEN, DB_PASS\n#sluice-secrets: API_TOKEN X\ndef main(p):\n  pass\n";
    assert.deepEqual(parseHeader(src).secrets, ["API_TOKEN", "DB_PASS", "X"]);
    assert.deepEqual(parseHeader("def main(p): pass\n").secrets, []);
  });
});

describe("masking", () => {
  it("replaces every occurrence, the longest value first, in strings and keys", () => {
    assert.equal(maskText("a-s3-b-s3", ["s3"]), "a-***-b-***");
    const v = maskDeep({ out: ["xx s3cret yy"], s3cret: 1, n: 5, ok: true }, ["s3", "s3cret"]);
    assert.deepEqual(v, { out: ["xx *** yy"], "***": 1, n: 5, ok: true });
    assert.equal(maskDeep("s3", []), "s3");
  });

  it("masks values with regex metacharacters, and short ones everywhere", () => {
    assert.equal(maskText("a.*b a(+)?$b", maskOrder(["a.*b", "(+)?$"])), "*** a***b");
    assert.equal(maskText("abcab", ["a"]), "***bc***b");
  });

  it("masks the start of a value a cut left at a text's end", () => {
    const order = maskOrder(["secret-1", "xyz"]);
    assert.equal(maskCutText("log: secr", order), "log: ***");
    assert.equal(maskCutText("log: s", order), "log: ***");
    assert.equal(maskCutText("log: secret-1 and secret-", order), "log: *** and ***");
    assert.equal(maskCutText("log: nothing", order), "log: nothing");
    // A character the cut split in two decodes as U+FFFD: counted with the start before it.
    assert.equal(maskCutText("log: pä\uFFFD", ["päss"]), "log: ***");
    assert.equal(maskCutText("log: \uFFFD", ["äb"]), "log: \uFFFD");
  });

  it("masks the start of a value at the output cap of a task's stdout", () => {
    const cut = "\n[output truncated: 9 more bytes discarded]\n";
    const o = maskOutcome(
      { status: "SUCCESS", value: 1, stdout: `ok tok${cut}`, stderr: "tok", durationMs: 1 },
      ["token"],
    );
    assert.equal(o.stdout, `ok ***${cut}`);
    assert.equal(o.stderr, "tok", "an uncut stream keeps a mere start");
  });

  it("masks a task's outcome where a script can put a value", () => {
    const o = maskOutcome(
      {
        status: "FAILURE",
        error: { type: "ValueError", message: "bad pw", traceback: "line pw" },
        stdout: "pw\n",
        stderr: "pw!",
        durationMs: 3,
      },
      ["pw"],
    );
    assert.deepEqual(o, {
      status: "FAILURE",
      error: { type: "ValueError", message: "bad ***", traceback: "line ***" },
      stdout: "***\n",
      stderr: "***!",
      durationMs: 3,
    });
  });
});
