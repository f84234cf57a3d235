import assert from "node:assert/strict";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { after, before, describe, it } from "node:test";
import { DF, deployAndActivate, NO_SCRIPT_FLOW } from "../helpers/flows.ts";
import { startProcess } from "../helpers/process.ts";
import { pythonDescendants } from "../helpers/process-tree.ts";
import { modeEnv, scopeHeaders, startServer, type TestServer, upload } from "../helpers/server.ts";
import { pollUntil } from "../helpers/wait.ts";

/** Where no bubblewrap is: the same as a machine without the package. */
const NO_BWRAP = "/nonexistent/bwrap";
const FIX = /apt-get install bubblewrap.*SCRIPT_SANDBOX=none/s;

const SCRIPT_FLOW = {
  vertexes: [
    { id: "in", type: "input" },
    { id: "py", type: "script", config: { code: "def main(p):\n    return 42\n" } },
    { id: "out", type: "output" },
  ],
  edges: [
    { source: "in", target: "py" },
    { source: "py", target: "out" },
  ],
};
const ORDERS = { orders: [{ amount: 2, qty: 3 }] };

describe("SCRIPT_SANDBOX=auto without a working bubblewrap refuses every script task", () => {
  let server: TestServer;
  const h = scopeHeaders();

  before(async () => {
    // Elements are stored by a node with its sandbox, then the same data is served by one
    // without: what the refusing node does with them is the subject, not how they got there.
    const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), "sluice-test-"));
    const env = await modeEnv();
    const seed = await startServer(env, { dataDir, keepData: true });
    try {
      const r = await upload(seed, [{ name: "echo.py", content: "def main(p):\n    return p\n" }], {
        path: "/s",
      });
      assert.equal(r.body.data[0].status, 0, r.text);
      await deployAndActivate(seed, "scripted", SCRIPT_FLOW);
      await deployAndActivate(seed, "plain", NO_SCRIPT_FLOW);
    } finally {
      await seed.close();
    }
    server = await startServer({ ...env, SCRIPT_BWRAP: NO_BWRAP }, { dataDir });
  });
  after(() => server.close());

  it("/health says tasks are refused, why, and the fix", async () => {
    const r = await server.call("GET", "/health");
    assert.equal(r.body.status, "ok");
    assert.equal(r.body.sandbox, "refused");
    assert.match(r.body.problem, new RegExp(`${NO_BWRAP} not found`));
    assert.match(r.body.problem, FIX);
  });

  it("script run-sync and run answer a business failure naming the cause", async () => {
    for (const p of ["/script/external/echo/run-sync", "/script/external/echo/run"]) {
      const r = await server.call("POST", `${p}?path=/s`, { headers: h, body: { a: 1 } });
      assert.equal(r.status, 200);
      assert.equal(r.body.status, false, r.text);
      assert.equal(r.body.code, 999999, r.text);
      assert.match(r.body.message, /script tasks are refused/);
      assert.match(r.body.message, FIX);
      assert.equal(r.headers.get("x-task-id"), null, "no task is created");
    }
  });

  it("a flow's script node fails the run with the same reason", async () => {
    const r = await server.call("POST", `${DF}/run-sync`, {
      headers: h,
      body: { elementName: "scripted", parameter: {} },
    });
    assert.equal(r.body.code, 28020004, r.text);
    assert.match(r.body.message, /^py: SandboxUnavailable: script tasks are refused/);
    assert.match(r.body.message, FIX);
  });

  it("flows without script nodes still run", async () => {
    const r = await server.call("POST", `${DF}/run-sync`, {
      headers: h,
      body: { elementName: "plain", parameter: ORDERS },
    });
    assert.deepEqual(r.body.data, [{ amount: 2, qty: 3, total: 6 }], r.text);
  });

  it("no Python process runs for tasks", async () => {
    // The seeding node's processes are gone once it closed; allow them a moment to be reaped
    // (grandchildren of this process: their exits reach no listener here, so the shared poll).
    await pollUntil(pythonDescendants, (left) => left.length === 0, "no python descendant left", {
      ms: 2000,
    });
  });
});

describe("the refusal is logged at start; SCRIPT_SANDBOX=none and =bwrap", () => {
  const dirs: string[] = [];
  const dataDir = () => {
    const d = fs.mkdtempSync(path.join(os.tmpdir(), "sluice-nobwrap-"));
    dirs.push(d);
    return d;
  };
  after(() => {
    for (const d of dirs) fs.rmSync(d, { recursive: true, force: true });
  });

  it("`sluice serve` starts, serves /health and logs an error with the fix", async () => {
    const { child, url, output } = await startProcess({
      ...(await modeEnv()),
      DATA_DIR: dataDir(),
      SCRIPT_BWRAP: NO_BWRAP,
      SCRIPT_PREFORK: "1",
    });
    try {
      assert.equal((await (await fetch(`${url}/health`)).json()).sandbox, "refused");
      const line = output()
        .split("\n")
        .find((l) => l.includes('"sandbox":"refused"'));
      assert.ok(line, output());
      const log = JSON.parse(line);
      assert.equal(log.level, 50, "logged as an error");
      assert.match(log.msg, FIX);
    } finally {
      child.kill("SIGKILL");
    }
  });

  it("SCRIPT_SANDBOX=bwrap refuses to start without bubblewrap", async () => {
    await assert.rejects(
      startProcess({ DATA_DIR: dataDir(), SCRIPT_BWRAP: NO_BWRAP, SCRIPT_SANDBOX: "bwrap" }),
      /SCRIPT_SANDBOX=bwrap but bubblewrap does not work/,
    );
  });

  it("SCRIPT_SANDBOX=none accepts uid + rlimits only and runs tasks", async () => {
    const server = await startServer({ SCRIPT_BWRAP: NO_BWRAP, SCRIPT_SANDBOX: "none" });
    try {
      assert.equal(server.services.runner.sandbox, process.getuid?.() === 0 ? "uid" : "none");
      await upload(server, [{ name: "echo.py", content: "def main(p):\n    return p\n" }], {
        path: "/",
      });
      const r = await server.call("POST", "/script/external/echo/run-sync", {
        headers: scopeHeaders(),
        body: { a: 1 },
      });
      assert.equal(r.headers.get("x-task-status"), "SUCCESS", r.text);
      assert.deepEqual(r.body, { a: 1 });
    } finally {
      await server.close();
    }
  });
});
