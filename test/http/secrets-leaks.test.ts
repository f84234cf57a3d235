import assert from "node:assert/strict";
import { randomBytes } from "node:crypto";
import fs from "node:fs";
import http from "node:http";
import type { AddressInfo } from "node:net";
import { after, before, describe, it } from "node:test";
import { DF, deployAndActivate } from "../helpers/flows.ts";
import {
  OTHER_SCOPE,
  scopeHeaders,
  startServer,
  TEST_MODE,
  type TestServer,
} from "../helpers/server.ts";

/**
 * docs/secrets.md, attacked: places a value could slip past the masking (a sub-flow's recorded
 * parameter, texts cut at a limit in the middle of a value) and another space using a name.
 */
const KEY = randomBytes(32).toString("hex");
const VALUE = `sv-${randomBytes(12).toString("hex")}`;
/** Long enough to be unmistakable in a record, short enough that a cut keeps it whole or not. */
const PREFIX = VALUE.slice(0, 10);
const OUTPUT_LIMIT = 256;
const h = scopeHeaders();
const other = scopeHeaders(OTHER_SCOPE);

const inlineToken = (code: string) => ({
  id: "tok",
  type: "script",
  config: { code, env: { API: "${secret.TOKEN}" } },
});

describe(`secrets: leaks past the mask (${TEST_MODE})`, () => {
  let server: TestServer;
  let hook: http.Server;
  let hookUrl = "";
  const call = (method: string, p: string, body?: unknown, headers = h) =>
    server.call(method, DF + p, { headers, body });

  before(async () => {
    server = await startServer({ SECRETS_KEY: KEY, LIMIT_OUTPUT_BYTES: String(OUTPUT_LIMIT) });
    // Echoes the authorization header: as JSON on /ok, else failing, after `pad` characters.
    hook = http.createServer((req, res) => {
      const url = new URL(req.url ?? "/", "http://x");
      const pad = Number(url.searchParams.get("pad"));
      req.resume();
      if (url.pathname === "/ok") {
        res.setHeader("content-type", "application/json");
        res.end(JSON.stringify({ auth: req.headers.authorization }));
        return;
      }
      res.statusCode = 500;
      res.end(`${"e".repeat(pad)}${req.headers.authorization ?? ""}`);
    });
    await new Promise<void>((r) => hook.listen(0, "127.0.0.1", r));
    hookUrl = `http://127.0.0.1:${(hook.address() as AddressInfo).port}`;
    const put = await call("PUT", "/secret/TOKEN", { value: VALUE });
    assert.equal(put.body.status, true, put.text);
  });

  after(async () => {
    hook?.close();
    await server?.close().catch(() => undefined);
    if (server) fs.rmSync(server.dataDir, { recursive: true, force: true });
  });

  const runSync = async (elementName: string) => {
    const r = await call("POST", "/run-sync", { elementName, parameter: {} });
    const run = await server.services.store.getRun(null, r.headers.get("x-run-id") ?? "");
    assert.ok(run, r.text);
    return { reply: r, run };
  };

  it("a request carrying a secret follows redirects within its origin only", async () => {
    const seen: string[] = [];
    const away = http.createServer((req, res) => {
      seen.push(String(req.headers["x-api-key"]));
      req.resume();
      res.end("{}");
    });
    await new Promise<void>((r) => away.listen(0, "127.0.0.1", r));
    const awayUrl = `http://127.0.0.1:${(away.address() as AddressInfo).port}`;
    const hop = http.createServer((req, res) => {
      req.resume();
      if (req.url === "/ok") {
        res.setHeader("content-type", "application/json");
        res.end(JSON.stringify({ landed: true }));
        return;
      }
      res.statusCode = 302;
      res.setHeader("location", req.url === "/same" ? "/ok" : `${awayUrl}/grab`);
      res.end();
    });
    await new Promise<void>((r) => hop.listen(0, "127.0.0.1", r));
    const hopUrl = `http://127.0.0.1:${(hop.address() as AddressInfo).port}`;
    try {
      for (const [name, path] of [
        ["hopsame", "/same"],
        ["hopaway", "/away"],
      ] as const) {
        await deployAndActivate(server, name, {
          vertexes: [
            { id: "in", type: "input" },
            {
              id: "call",
              type: "http",
              config: { url: `${hopUrl}${path}`, headers: { "x-api-key": "${secret.TOKEN}" } },
            },
            { id: "out", type: "output" },
          ],
          edges: [
            { source: "in", target: "call" },
            { source: "call", target: "out" },
          ],
        });
      }
      const same = await runSync("hopsame");
      assert.equal(same.run.status, "SUCCESS", same.reply.text);
      const gone = await runSync("hopaway");
      assert.equal(gone.run.status, "FAILURE", gone.reply.text);
      assert.match(JSON.stringify(gone.run), /not followed: the request carries secrets/);
      assert.deepEqual(seen, [], "the other origin received the request");
    } finally {
      away.close();
      hop.close();
    }
  });

  it("does not record a value in a sub-flow's parameter", async () => {
    await deployAndActivate(server, "child", {
      vertexes: [
        { id: "in", type: "input" },
        { id: "out", type: "output" },
      ],
      edges: [{ source: "in", target: "out" }],
    });
    await deployAndActivate(server, "parent", {
      vertexes: [
        { id: "in", type: "input" },
        {
          id: "tok",
          type: "http",
          config: { url: `${hookUrl}/ok`, headers: { authorization: "${secret.TOKEN}" } },
        },
        {
          id: "sub",
          type: "subflow",
          config: { element: { elementName: "child", path: "/flows" } },
        },
        { id: "out", type: "output" },
      ],
      edges: [
        { source: "in", target: "tok" },
        { source: "tok", target: "sub" },
        { source: "sub", target: "out" },
      ],
    });
    const { reply, run } = await runSync("parent");
    assert.equal(run.status, "SUCCESS", reply.text);
    const children = await server.services.store.childRuns(run.id);
    assert.equal(children.length, 1);
    const child = JSON.stringify(children[0]);
    assert.ok(!child.includes(VALUE), `the sub-flow's run record holds the value: ${child}`);
    assert.ok(!reply.text.includes(VALUE));
  });

  it("does not keep the start of a value a failing server echoes at the 500-character cut", async () => {
    for (const pad of [480, 490, 495]) {
      const name = `echo${pad}`;
      await deployAndActivate(server, name, {
        vertexes: [
          { id: "in", type: "input" },
          {
            id: "call",
            type: "http",
            config: {
              url: `${hookUrl}/?pad=${pad}`,
              headers: { authorization: "${secret.TOKEN}" },
            },
          },
          { id: "out", type: "output" },
        ],
        edges: [
          { source: "in", target: "call" },
          { source: "call", target: "out" },
        ],
      });
      const { run } = await runSync(name);
      assert.equal(run.status, "FAILURE");
      const text = JSON.stringify(run);
      assert.match(text, /HTTP 500 from GET/);
      assert.ok(!text.includes(PREFIX), `pad ${pad}: the record keeps the value's start: ${text}`);
    }
  });

  it("does not keep the start of a value printed across the output limit", async () => {
    const code = [
      "import os, sys",
      "def main(p):",
      `    sys.stdout.write('o' * ${OUTPUT_LIMIT - 12} + os.environ['API'] + '\\n')`,
      // Split across two writes and flushes: masked as one text all the same.
      "    v = os.environ['API']",
      "    sys.stderr.write(v[:5]); sys.stderr.flush(); sys.stderr.write(v[5:] + '\\n')",
      "    return 1",
    ].join("\n");
    await deployAndActivate(
      server,
      "chatty",
      {
        vertexes: [{ id: "in", type: "input" }, inlineToken(code), { id: "out", type: "output" }],
        edges: [
          { source: "in", target: "tok" },
          { source: "tok", target: "out" },
        ],
      },
      { logContent: "DETAILED" },
    );
    const { run } = await runSync("chatty");
    const text = JSON.stringify(run);
    assert.match(text, /output truncated/, text);
    assert.ok(!text.includes(PREFIX), `the record keeps the value's start: ${text}`);
    assert.ok(!text.includes(VALUE.slice(5)), "the split value is not masked");
  });

  it("lets another space neither deploy nor see a secret of this one", async () => {
    const d = await call(
      "POST",
      "/flow/deploy",
      {
        elementName: "steal",
        revisionName: "r1",
        flow: {
          vertexes: [
            { id: "in", type: "input" },
            inlineToken("import os\ndef main(p):\n    return os.environ['API']\n"),
            { id: "out", type: "output" },
          ],
          edges: [
            { source: "in", target: "tok" },
            { source: "tok", target: "out" },
          ],
        },
        configure: {},
      },
      other,
    );
    const found = d.body.data.filter((r: { errorCode: number }) => r.errorCode === 28050018);
    assert.equal(found.length, 1, d.text);
    assert.match(JSON.stringify(found[0]), /secret TOKEN does not exist in this space/);
  });
});
