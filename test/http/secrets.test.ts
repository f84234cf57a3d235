import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { randomBytes } from "node:crypto";
import fs from "node:fs";
import http from "node:http";
import type { AddressInfo } from "node:net";
import path from "node:path";
import { Writable } from "node:stream";
import { after, before, describe, it } from "node:test";
import pg from "pg";
import pino from "pino";
import { DF, deployAndActivate } from "../helpers/flows.ts";
import {
  OTHER_SCOPE,
  scopeHeaders,
  startServer,
  TEST_MODE,
  type TestServer,
  upload,
} from "../helpers/server.ts";

/**
 * docs/secrets.md: a secret reaches an http node's server and a script's environment, and is
 * nowhere in what Sluice keeps: database, logs, answers, exports.
 */
const KEY = randomBytes(32).toString("base64");
const VALUE = `sv-${randomBytes(12).toString("hex")}`;
const h = scopeHeaders();
const other = scopeHeaders(OTHER_SCOPE);

const READER = [
  "# sluice-secrets: TOKEN",
  "import os",
  "def main(p):",
  "    print('element sees', os.environ['TOKEN'])",
  "    return {'token': os.environ['TOKEN'], 'in': p}",
  "",
].join("\n");

function flowWith(hookUrl: string, tokenRef = "${secret.TOKEN}") {
  return {
    vertexes: [
      { id: "in", type: "input" },
      {
        id: "call",
        type: "http",
        config: {
          method: "POST",
          url: `${hookUrl}/hook/${tokenRef}?who={{who}}`,
          headers: { authorization: `Bearer ${tokenRef}` },
          body: { who: "{{who}}" },
        },
      },
      {
        id: "inline",
        type: "script",
        config: {
          code: "import os\ndef main(p):\n    print('inline sees', os.environ['API'])\n    return {'api': os.environ['API'], 'echo': p}\n",
          env: { API: tokenRef, PLAIN: "x" },
        },
      },
      { id: "element", type: "script", config: { element: { elementName: "reader", path: "/s" } } },
      { id: "out", type: "output" },
    ],
    edges: [
      { source: "in", target: "call" },
      { source: "call", target: "inline" },
      { source: "inline", target: "element" },
      { source: "element", target: "out" },
    ],
  };
}

describe(`secrets (${TEST_MODE})`, () => {
  let server: TestServer;
  let hook: http.Server;
  let hookUrl = "";
  const received: { url: string; authorization: string | undefined }[] = [];
  let logs = "";
  const sink = new Writable({
    write(chunk, _enc, done) {
      logs += String(chunk);
      done();
    },
  });
  const call = (method: string, p: string, body?: unknown, headers = h) =>
    server.call(method, DF + p, { headers, body });

  before(async () => {
    const logger = pino({ level: "trace" }, sink);
    server = await startServer({ SECRETS_KEY: KEY }, { keepData: true, logger });
    hook = http.createServer((req, res) => {
      received.push({ url: req.url ?? "", authorization: req.headers.authorization });
      req.resume();
      req.on("end", () => {
        res.setHeader("content-type", "application/json");
        // An echoing server: the value comes back in the node's output.
        res.end(JSON.stringify({ gotAuth: req.headers.authorization, path: req.url }));
      });
    });
    await new Promise<void>((r) => hook.listen(0, "127.0.0.1", r));
    hookUrl = `http://127.0.0.1:${(hook.address() as AddressInfo).port}`;
    const up = await upload(server, [{ name: "reader.py", content: READER }], { path: "/s" });
    assert.equal(up.body.status, true, up.text);
  });

  after(async () => {
    hook?.close();
    await server?.close().catch(() => undefined);
    if (server) fs.rmSync(server.dataDir, { recursive: true, force: true });
  });

  it("creates, replaces and lists secrets by name, never answering a value", async () => {
    const first = await call("PUT", "/secret/TOKEN", { value: "first-value" });
    assert.equal(first.body.status, true, first.text);
    assert.deepEqual(Object.keys(first.body.data).sort(), ["createTime", "name", "updateTime"]);
    const put = await call("PUT", "/secret/TOKEN", { value: VALUE });
    assert.equal(put.body.data.createTime, first.body.data.createTime);
    const list = await call("GET", "/secret");
    assert.deepEqual(
      list.body.data.map((s: { name: string }) => s.name),
      ["TOKEN"],
    );
    const one = await call("GET", "/secret/TOKEN");
    assert.equal(one.body.data.name, "TOKEN");
    for (const r of [first, put, list, one]) assert.ok(!r.text.includes("value"), r.text);
  });

  it("keeps scopes apart: another space sees nothing and cannot delete", async () => {
    assert.deepEqual((await call("GET", "/secret", undefined, other)).body.data, []);
    const get = await call("GET", "/secret/TOKEN", undefined, other);
    assert.deepEqual([get.body.status, get.body.code], [false, 28060001]);
    const del = await call("DELETE", "/secret/TOKEN", undefined, other);
    assert.deepEqual([del.body.status, del.body.code], [false, 28060001]);
  });

  it("refuses bad names and values with a 400 naming the field", async () => {
    const badName = await call("PUT", "/secret/1abc", { value: "v" });
    assert.deepEqual([badName.body.status, badName.body.code], [false, 400]);
    assert.match(badName.body.message, /name/);
    const badValue = await call("PUT", "/secret/OK", { value: 5 });
    assert.deepEqual([badValue.body.status, badValue.body.code], [false, 400]);
    assert.match(badValue.body.message, /value/);
    const noValue = await call("PUT", "/secret/OK", {});
    assert.deepEqual([noValue.body.status, noValue.body.code], [false, 400]);
    assert.match(noValue.body.message, /value/);
  });

  it("refuses a deploy that references an unknown secret, naming node and field", async () => {
    const d = await call("POST", "/flow/deploy", {
      elementName: "bad",
      revisionName: "r1",
      path: "/flows",
      flow: flowWith(hookUrl, "${secret.MISSING}"),
      configure: {},
    });
    const found = d.body.data.filter((r: { errorCode: number }) => r.errorCode === 28050018);
    const at = found.map((r: { nodeId: string; path: unknown[] }) => [r.nodeId, r.path.slice(4)]);
    assert.deepEqual(at, [
      ["call", ["url"]],
      ["call", ["headers", "authorization"]],
      ["inline", ["env", "API"]],
    ]);
  });

  it("sends the value to the http node's server and scripts, and masks what runs record", async () => {
    await deployAndActivate(server, "uses", flowWith(hookUrl), { logContent: "DETAILED" });
    const r = await call("POST", "/run-sync", { elementName: "uses", parameter: { who: "me" } });
    assert.equal(r.body.status, true, r.text);
    const sent = received.at(-1);
    assert.equal(sent?.authorization, `Bearer ${VALUE}`);
    assert.equal(sent?.url, `/hook/${VALUE}?who=me`);
    const runId = r.headers.get("x-run-id") ?? "";
    const shown = await server.call("GET", `${DF}/monitor/run?runId=${runId}`, { headers: h });
    assert.equal(shown.body.data.runStatus, "SUCCESS", shown.text);
    const run = await server.services.store.getRun(null, runId);
    const nodes = run?.detail?.nodes as { nodeId: string }[];
    const inline = JSON.stringify(nodes.find((n) => n.nodeId === "inline"));
    assert.match(inline, /inline sees \*\*\*/);
    assert.match(inline, /"api":"\*\*\*"/);
    const callNode = JSON.stringify(nodes.find((n) => n.nodeId === "call"));
    assert.match(callNode, /"gotAuth":"Bearer \*\*\*"/, "the echoed value is masked in the output");
    const element = JSON.stringify(nodes.find((n) => n.nodeId === "element"));
    assert.match(element, /element sees \*\*\*/);
    assert.deepEqual(r.body.data.token, "***");
    for (const text of [r.text, shown.text]) assert.ok(!text.includes(VALUE));
  });

  it("gives a script task its element's declared secrets, masked in stdout and result", async () => {
    const r = await server.call("POST", "/script/script/run-sync", {
      headers: h,
      body: { elementName: "reader", path: "/s", parameter: 2 },
    });
    assert.deepEqual(r.body.data, { token: "***", in: 2 }, r.text);
    const direct = await server.call("POST", "/script/external/reader/run-sync?path=/s", {
      headers: h,
      body: 1,
    });
    assert.deepEqual(direct.body, { token: "***", in: 1 }, direct.text);
    const taskId = direct.headers.get("x-task-id") ?? "";
    const run = await server.services.store.getRun(null, taskId);
    assert.match(run?.stdout ?? "", /element sees \*\*\*/);
    for (const text of [r.text, direct.text]) assert.ok(!text.includes(VALUE));
  });

  it("refuses an upload that declares a name no secret can have, naming it", async () => {
    const r = await upload(
      server,
      [
        {
          name: "badname.py",
          content: "# sluice-secrets: TOKEN, api-token\ndef main(p): return 1\n",
        },
      ],
      { path: "/s" },
    );
    const item = (r.body.data as { status: number; message: string }[])[0];
    assert.equal(item?.status, 2, r.text);
    assert.match(
      item?.message ?? "",
      /^badname\.py: sluice-secrets: "api-token" is not a secret name/,
    );
  });

  it("exports references by name only", async () => {
    const r = await call("POST", "/export", { path: "/" });
    assert.equal(r.body.status, true, r.text);
    assert.ok(r.text.includes("${secret.TOKEN}"));
    assert.ok(!r.text.includes(VALUE));
  });

  it("refuses to delete a secret a live flow uses, naming the flow", async () => {
    const d = await call("DELETE", "/secret/TOKEN");
    assert.deepEqual([d.body.status, d.body.code], [false, 28060002]);
    assert.match(d.body.message, /TOKEN is used by live flows: uses/);
    await call("POST", "/flow/deactivate", { elementName: "uses", path: "/flows" });
    await call("PUT", "/secret/SPARE", { value: VALUE });
    const ok = await call("DELETE", "/secret/SPARE");
    assert.equal(ok.body.status, true, ok.text);
    assert.deepEqual(
      (await call("GET", "/secret")).body.data.map((s: { name: string }) => s.name),
      ["TOKEN"],
    );
  });

  it("leaves the value in no stored byte and no log line", async () => {
    const databaseUrl = server.config.databaseUrl;
    await server.close();
    assert.ok(logs.length > 0, "the service logged");
    assert.ok(!logs.includes(VALUE), "a log line holds the secret");
    const stored =
      TEST_MODE === "cluster" ? await dumpPostgres(databaseUrl ?? "") : filesUnder(server.dataDir);
    assert.ok(stored.includes("TOKEN"), "the dump holds the secret's name (it reads the data)");
    assert.ok(stored.includes("inline sees ***"), "the dump holds the masked run records");
    assert.ok(!stored.includes(VALUE), "a stored record holds the secret");
  });

  it("refuses a start with a wrong SECRETS_KEY, naming it and never the key", async () => {
    const wrong = randomBytes(32).toString("hex");
    const env: Record<string, string> = {
      ...(process.env as Record<string, string>),
      DATA_DIR: server.dataDir,
      SECRETS_KEY: wrong,
      PORT: "0",
      LOG_LEVEL: "info",
      ...(server.config.databaseUrl ? { DATABASE_URL: server.config.databaseUrl } : {}),
    };
    const bin = path.resolve(import.meta.dirname, "../../bin/sluice.js");
    const child = spawn(process.execPath, [bin, "serve"], {
      env,
      stdio: ["ignore", "pipe", "pipe"],
    });
    let output = "";
    child.stdout.on("data", (c) => (output += c));
    child.stderr.on("data", (c) => (output += c));
    const code = await new Promise<number | null>((r) => child.on("exit", (c) => r(c)));
    assert.notEqual(code, 0);
    assert.match(output, /SECRETS_KEY does not match/);
    assert.ok(!output.includes(wrong) && !output.includes(KEY));
  });
});

/** Every file under the data directory (database, WAL, task directories), as one latin1 text. */
function filesUnder(dir: string): string {
  let out = "";
  for (const e of fs.readdirSync(dir, { withFileTypes: true, recursive: true })) {
    if (e.isFile()) out += fs.readFileSync(path.join(e.parentPath, e.name)).toString("latin1");
  }
  return out;
}

/** Every row of every table of every schema but the catalogs, as text. */
async function dumpPostgres(url: string): Promise<string> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    const tables = await client.query<{ s: string; t: string }>(
      `SELECT table_schema AS s, table_name AS t FROM information_schema.tables
        WHERE table_type = 'BASE TABLE' AND table_schema NOT IN ('pg_catalog', 'information_schema')`,
    );
    let out = "";
    for (const { s, t } of tables.rows) {
      const q = `SELECT x::text AS row FROM ${client.escapeIdentifier(s)}.${client.escapeIdentifier(t)} x`;
      for (const r of (await client.query<{ row: string }>(q)).rows) out += `${r.row}\n`;
    }
    return out;
  } finally {
    await client.end();
  }
}

describe(`secrets without SECRETS_KEY (${TEST_MODE})`, () => {
  it("the service starts; secret endpoints and flows that reference secrets answer why", async () => {
    const server = await startServer();
    try {
      const list = await server.call("GET", `${DF}/secret`, { headers: h });
      assert.deepEqual([list.body.status, list.body.code], [false, 28060003]);
      assert.match(list.body.message, /SECRETS_KEY is not set/);
      const put = await server.call("PUT", `${DF}/secret/X`, { headers: h, body: { value: "v" } });
      assert.equal(put.body.code, 28060003);
      const d = await server.call("POST", `${DF}/flow/deploy`, {
        headers: h,
        body: {
          elementName: "nokey",
          revisionName: "r1",
          flow: flowWith("http://127.0.0.1:9"),
          configure: {},
        },
      });
      assert.ok(d.body.data.some((r: { errorCode: number }) => r.errorCode === 28050018));
    } finally {
      await server.close();
    }
  });
});
