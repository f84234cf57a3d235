/* biome-ignore-all lint/suspicious/noTemplateCurlyInString: run-name placeholders are literal text */
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { RUN_NAME_MAX } from "../../src/flows/run-name.ts";
import { DF, deployAndActivate, NO_SCRIPT_FLOW } from "../helpers/flows.ts";
import { scopeHeaders, startServer, type TestServer, upload } from "../helpers/server.ts";

/**
 * Run names are labels, bounded (docs/flow-graph.md, "Run names"): a template that repeats a
 * parameter's field 256 times made a 64 KiB parameter into a 16 MiB name, stored with every run;
 * a task's `taskName` had no bound at all.
 */
describe("run names are at most RUN_NAME_MAX characters", () => {
  let server: TestServer;
  const h = scopeHeaders();
  before(async () => {
    server = await startServer();
  });
  after(() => server.close());

  it("a rendered name is cut, whatever the template and the parameter", async () => {
    await deployAndActivate(server, "named", NO_SCRIPT_FLOW, {
      runNameTemplate: "${param.a}".repeat(256),
    });
    const parameter = { orders: [{ amount: 1, qty: 1 }], a: "n".repeat(64 * 1024) };
    const r = await server.call("POST", `${DF}/run-sync`, {
      headers: h,
      body: { elementName: "named", path: "/flows", parameter },
    });
    assert.equal(r.body.code, 0, r.text.slice(0, 300));
    const runId = r.headers.get("x-run-id") ?? "";
    const run = await server.services.store.getRun(null, runId);
    assert.equal(run?.runName?.length, RUN_NAME_MAX);
  });

  it("a taskName past the bound is a 400 naming it; one at the bound is the task's name", async () => {
    const up = await upload(
      server,
      [{ name: "echo.py", content: "def main(p):\n    return p\n" }],
      { path: "/s" },
    );
    assert.equal(up.body.data[0].status, 0, up.text);
    const call = (taskName: string) =>
      server.call(
        "POST",
        `${server.config.scriptPrefix}/external/echo/run-sync?taskName=${taskName}`,
        { headers: h, body: { x: 1 } },
      );
    const long = await call("t".repeat(RUN_NAME_MAX + 1));
    assert.equal(long.body.code, 400, long.text.slice(0, 300));
    assert.match(long.body.message, /taskName/);
    const ok = await call("t".repeat(RUN_NAME_MAX));
    assert.deepEqual(ok.body, { x: 1 });
    const task = await server.services.store.getRun(null, ok.headers.get("x-task-id") ?? "");
    assert.equal(task?.runName, "t".repeat(RUN_NAME_MAX));
  });
});
