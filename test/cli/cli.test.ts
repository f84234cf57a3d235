import assert from "node:assert/strict";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { after, before, describe, it } from "node:test";
import { NO_SCRIPT_FLOW } from "../helpers/flows.ts";
import { sluice } from "../helpers/process.ts";
import { SCOPE, startServer, type TestServer } from "../helpers/server.ts";

describe("sluice CLI against a real server", () => {
  let server: TestServer;
  let env: Record<string, string>;
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "sluice-cli-"));
  const file = (name: string, content: unknown) => {
    const p = path.join(dir, name);
    fs.writeFileSync(p, typeof content === "string" ? content : JSON.stringify(content));
    return p;
  };

  before(async () => {
    server = await startServer();
    env = {
      SLUICE_URL: server.url,
      SLUICE_APP: SCOPE.app,
      SLUICE_SPACE: SCOPE.space,
      SLUICE_USER: SCOPE.user,
    };
  });
  after(async () => {
    await server.close();
    fs.rmSync(dir, { recursive: true, force: true });
  });

  it("deploys a bare graph file and activates it", async () => {
    const r = await sluice(
      ["deploy", file("orders.json", NO_SCRIPT_FLOW), "--path", "/cli", "--activate"],
      env,
    );
    assert.equal(r.code, 0, r.stderr);
    assert.match(r.stdout, /deployed orders, APPROVED/);
    assert.ok(!r.stdout.includes("\u001b["), "no colours off a TTY");
  });

  it("activates an older revision with --version (a rollback)", async () => {
    const v2 = structuredClone(NO_SCRIPT_FLOW);
    v2.vertexes[1] = { id: "clean", type: "transform", config: { operators: [] } };
    const d = await sluice(["deploy", file("orders.json", v2), "--path", "/cli"], env);
    assert.equal(d.code, 0, d.stderr);
    const r = await sluice(
      ["activate", "orders", "--path", "/cli", "--version", "1", "--json"],
      env,
    );
    assert.equal(r.code, 0, r.stderr);
    assert.deepEqual(JSON.parse(r.stdout), { elementName: "orders", status: "APPROVED" });
    const [el] = await server.services.store.findElements(
      { app: "app1", space: "space1" },
      { type: "DPL", name: "orders" },
    );
    assert.equal(el?.releaseVersion, 1);
    assert.equal((await sluice(["activate", "orders", "--version", "x"], env)).code, 2);
  });

  it("refuses an invalid flow with exit code 8 and names the problem", async () => {
    const bad = { vertexes: [{ id: "a", type: "nope" }], edges: [] };
    const r = await sluice(["deploy", file("bad.json", bad), "--path", "/cli", "--json"], env);
    assert.equal(r.code, 8);
    const out = JSON.parse(r.stdout);
    assert.equal(out.deployed, false);
    assert.equal(out.results[0].nodeId, "a");
  });

  it("runs synchronously, asynchronously and with --wait", async () => {
    const param = JSON.stringify({
      orders: [
        { amount: 2, qty: 3 },
        { amount: 0, qty: 1 },
      ],
    });
    const sync = await sluice(["run", "orders", "--param", param, "--sync", "--json"], env);
    assert.equal(sync.code, 0, sync.stderr);
    assert.deepEqual(JSON.parse(sync.stdout).result, [{ amount: 2, qty: 3, total: 6 }]);

    const started = await sluice(["run", "orders", "--param", param], env);
    assert.equal(started.code, 0, started.stderr);
    assert.match(started.stdout.trim(), /^\S+$/, "only the run ID on stdout");

    const waited = await sluice(
      ["run", "orders", "--param", `@${file("p.json", param)}`, "--wait"],
      env,
    );
    assert.equal(waited.code, 0, waited.stderr);
    assert.deepEqual(JSON.parse(waited.stdout), [{ amount: 2, qty: 3, total: 6 }]);
  });

  it("lists runs as a table and as JSON, with filters", async () => {
    const table = await sluice(["runs", "orders", "--path", "/cli"], env);
    assert.equal(table.code, 0, table.stderr);
    assert.match(table.stdout, /SUCCESS/);
    assert.match(table.stdout, /3 runs/);
    const json = await sluice(["runs", "orders", "--trigger", "sync", "--json"], env);
    const page = JSON.parse(json.stdout);
    assert.equal(page.totalCount, 1);
    assert.equal(page.runs[0].triggerType, "SYNC");
    const none = await sluice(["runs", "orders", "--status", "FAILURE", "--json"], env);
    assert.equal(JSON.parse(none.stdout).totalCount, 0);
  });

  it("uploads scripts, runs one, and shows its logs", async () => {
    const py = file(
      "hello.py",
      "def main(p):\n    print('hi from', p['who'])\n    return {'greeting': 'hello ' + p['who']}\n",
    );
    const up = await sluice(["upload", py, "--path", "/py"], env);
    assert.equal(up.code, 0, up.stderr);
    assert.match(up.stdout, /\/py\/hello .*imported/);
    const again = await sluice(["upload", py, "--path", "/py", "--json"], env);
    assert.equal(JSON.parse(again.stdout)[0].status, 1, "skipped without --overwrite");

    const r = await sluice(
      ["run", "hello", "--type", "PY", "--param", '{"who":"cli"}', "--wait", "--json"],
      env,
    );
    assert.equal(r.code, 0, r.stderr);
    const out = JSON.parse(r.stdout);
    assert.deepEqual(out.result, { greeting: "hello cli" });
    const logs = await sluice(["logs", out.id], env);
    assert.equal(logs.code, 0, logs.stderr);
    assert.match(logs.stdout, /hi from cli/);
  });

  it("shows a failed task's traceback in logs, apart from its output", async () => {
    const py = file(
      "sour.py",
      "def check(p):\n    raise ValueError('bad order ' + str(p['id']))\n\ndef main(p):\n    print('checking')\n    return check(p)\n",
    );
    assert.equal((await sluice(["upload", py, "--path", "/py"], env)).code, 0);
    const r = await sluice(["run", "sour", "--type", "PY", "--param", '{"id":7}'], env);
    assert.equal(r.code, 0, r.stderr);
    await server.services.tasks.waitForEnd(null, r.stdout.trim(), 10);
    const logs = await sluice(["logs", r.stdout.trim()], env);
    assert.equal(logs.code, 0, logs.stderr);
    // Under its own heading, after the output: the file and line of the user's code.
    assert.match(
      logs.stdout,
      /\n {2}stdout\n {4}checking\n {2}error\n {4}Traceback \(most recent call last\):\n {6}File "sour\.py", line 6, in main\n/,
    );
    assert.match(
      logs.stdout,
      /File "sour\.py", line 2, in check\n.*\n {4}ValueError: bad order 7\n$/s,
    );
  });

  it("shows each node of a flow run in logs", async () => {
    const flow = {
      vertexes: [
        { id: "in", type: "input" },
        {
          id: "py",
          type: "script",
          config: {
            code: "def main(p):\n    print('node says', p['n'])\n    if p['n'] < 0:\n        raise ValueError('negative')\n    return p['n'] * 2\n",
          },
        },
      ],
      edges: [{ source: "in", target: "py" }],
    };
    assert.equal(
      (await sluice(["deploy", file("dbl.json", flow), "--name", "dbl", "--activate"], env)).code,
      0,
    );
    const ok = await sluice(["run", "dbl", "--param", '{"n":4}', "--sync", "--json"], env);
    const runId = JSON.parse(ok.stdout).id;
    const logs = await sluice(["logs", runId], env);
    assert.match(logs.stdout, /py \(script\) SUCCESS/);
    assert.match(logs.stdout, /node says 4/);
    const failed = await sluice(["run", "dbl", "--param", '{"n":-1}', "--wait", "--json"], env);
    assert.equal(failed.code, 1);
    assert.match(failed.stdout, /negative/);
    const failedLogs = await sluice(["logs", JSON.parse(failed.stdout).id], env);
    // The failed node's traceback names the line of its code.
    assert.match(failedLogs.stdout, /File "node_py\.py", line 4, in main/);
  });

  it("exit codes: not found 5, unreachable 3, usage 2", async () => {
    assert.equal((await sluice(["run", "no-such-flow", "--sync"], env)).code, 5);
    assert.equal(
      (await sluice(["runs", "orders"], { ...env, SLUICE_URL: "http://127.0.0.1:9" })).code,
      3,
    );
    assert.equal((await sluice(["run"], env)).code, 2);
    assert.equal((await sluice(["run", "orders", "--param", "{not json"], env)).code, 2);
  });
});

describe("sluice CLI in signature mode", () => {
  let server: TestServer;
  const secrets = {
    AUTH_MODE: "signature",
    AUTH_APP_SECRETS: "app1=s3cret",
    AUTH_SESSION_SECRET: "sess",
  };
  before(async () => {
    server = await startServer(secrets);
  });
  after(() => server.close());

  it("is unauthorized (4) without credentials and works with a minted token", async () => {
    const env = {
      SLUICE_URL: server.url,
      SLUICE_APP: "app1",
      SLUICE_SPACE: "s1",
      SLUICE_USER: "u1",
    };
    assert.equal((await sluice(["activate", "x"], env)).code, 4);
    const minted = await sluice(
      ["token", "--app", "app1", "--space", "s1", "--user", "u1"],
      secrets,
    );
    const token = /token: (\S+)/.exec(minted.stdout)?.[1] ?? "";
    const r = await sluice(["runs", "x", "--json"], { ...env, SLUICE_TOKEN: token });
    assert.equal(r.code, 5, r.stdout);
    const cookie = /cookie: (\S+)/.exec(minted.stdout)?.[1] ?? "";
    const viaCookie = await sluice(["activate", "x", "--cookie", cookie, "--url", server.url]);
    assert.equal(viaCookie.code, 5, viaCookie.stderr);
  });
});
