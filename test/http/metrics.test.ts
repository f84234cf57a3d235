import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { DF, deployAndActivate, NO_SCRIPT_FLOW } from "../helpers/flows.ts";
import { scopeHeaders, startServer, type TestServer } from "../helpers/server.ts";

/** The value of one sample line, e.g. `sluice_runs_total{type="DPL",status="SUCCESS",trigger="SYNC"}`. */
function sample(
  text: string,
  name: string,
  labels: Record<string, string> = {},
): number | undefined {
  for (const line of text.split("\n")) {
    if (!line.startsWith(name)) continue;
    const rest = line.slice(name.length);
    if (rest[0] !== "{" && rest[0] !== " ") continue;
    if (Object.entries(labels).every(([k, v]) => rest.includes(`${k}="${v}"`))) {
      return Number(line.split(" ").at(-1));
    }
  }
  return undefined;
}

describe("operations endpoints", () => {
  let server: TestServer;
  before(async () => {
    server = await startServer();
  });
  after(() => server.close());

  it("counts runs by status and trigger, with duration histograms", async () => {
    await deployAndActivate(server, "metered", NO_SCRIPT_FLOW);
    const param = { orders: [{ amount: 1, qty: 2 }] };
    const sync = await server.call("POST", `${DF}/run-sync`, {
      headers: scopeHeaders(),
      body: { elementName: "metered", parameter: param },
    });
    assert.equal(sync.body.status, true);
    const res = await fetch(`${server.url}/metrics`);
    assert.equal(res.status, 200);
    assert.match(res.headers.get("content-type") ?? "", /text\/plain/);
    const text = await res.text();
    assert.equal(
      sample(text, "sluice_runs_total", { type: "DPL", status: "SUCCESS", trigger: "SYNC" }),
      1,
    );
    assert.equal(sample(text, "sluice_runs_created_total", { type: "DPL", trigger: "SYNC" }), 1);
    assert.equal(
      sample(text, "sluice_run_duration_seconds_count", { type: "DPL", status: "SUCCESS" }),
      1,
    );
    assert.equal(sample(text, "sluice_queue_depth"), 0);
    assert.ok((sample(text, "sluice_script_pool", { state: "idle" }) ?? -1) >= 0);
    assert.ok(
      (sample(text, "sluice_http_request_duration_seconds_count", {
        route: `${DF}/run-sync`,
        method: "POST",
      }) ?? 0) >= 1,
    );
  });

  it("times script executions", async () => {
    const flow = {
      vertexes: [
        { id: "in", type: "input" },
        {
          id: "py",
          type: "script",
          config: {
            code: "def main(p):\n    if p.get('fail'):\n        raise ValueError('no')\n    return 7\n",
          },
        },
      ],
      edges: [{ source: "in", target: "py" }],
    };
    await deployAndActivate(server, "metered-py", flow);
    const r = await server.call("POST", `${DF}/run-sync`, {
      headers: scopeHeaders(),
      body: { elementName: "metered-py", parameter: {} },
    });
    assert.equal(r.body.data, 7);
    const bad = await server.call("POST", `${DF}/run`, {
      headers: scopeHeaders(),
      body: { elementName: "metered-py", parameter: { fail: true } },
    });
    const end = await server.call("GET", `${DF}/run/${bad.body.data}/result?timeout=10`);
    assert.equal(end.body.code, 28020004);
    const text = await (await fetch(`${server.url}/metrics`)).text();
    assert.equal(sample(text, "sluice_script_duration_seconds_count", { status: "SUCCESS" }), 1);
    assert.equal(sample(text, "sluice_script_duration_seconds_count", { status: "FAILURE" }), 1);
    assert.equal(
      sample(text, "sluice_runs_total", { type: "DPL", status: "FAILURE", trigger: "ASYNC" }),
      1,
    );
  });

  it("echoes x-request-id, generating one when absent", async () => {
    const given = await fetch(`${server.url}/health`, { headers: { "x-request-id": "req-42" } });
    assert.equal(given.headers.get("x-request-id"), "req-42");
    const made = await server.call("GET", `${DF}/flow/list`);
    assert.match(made.headers.get("x-request-id") ?? "", /^[0-9a-f-]{36}$/);
  });

  it("tells readiness from liveness", async () => {
    const ready = await server.call("GET", "/ready");
    assert.equal(ready.status, 200);
    assert.equal(ready.body.status, "ready");
    assert.equal(ready.body.checks.store, "ok");
    assert.match(ready.body.checks.runner, /^ok/);
    const health = await server.call("GET", "/health");
    assert.equal(health.status, 200);
  });
});
