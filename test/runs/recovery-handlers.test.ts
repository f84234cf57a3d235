import assert from "node:assert/strict";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { describe, it } from "node:test";
import { DF, deployAndActivate, NO_SCRIPT_FLOW } from "../helpers/flows.ts";
import { scopeHeaders, startServer } from "../helpers/server.ts";
import { startReceiver } from "../http/error-handlers-helpers.ts";

describe("a run failed by recovery", () => {
  it("is published as an end: its flow's error handlers are called and metrics count it", async () => {
    const hook = await startReceiver();
    const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), "sluice-recovery-handlers-"));
    const h = scopeHeaders();
    const first = await startServer({}, { dataDir, keepData: true });
    let runId: string;
    try {
      await deployAndActivate(first, "recovered", NO_SCRIPT_FLOW, {
        errorHandlers: { bot: { webhookUrl: `${hook.url}/recovered` } },
      });
      const start = await first.call("POST", `${DF}/run`, {
        headers: h,
        body: { elementName: "recovered", parameter: { orders: [] } },
      });
      runId = start.body.data as string;
      const done = await first.call("GET", `${DF}/run/${runId}/result?timeout=5`, { headers: h });
      assert.equal(done.body.status, true, JSON.stringify(done.body));
      // As a crash in the middle of the run would have left it.
      const scope = { app: h.app, space: h.space };
      const run = await first.services.store.getRun(scope, runId);
      assert.ok(run);
      await first.services.store.insertRun({
        ...run,
        id: `${runId}-crashed`,
        status: "STARTED",
        startTime: Date.now(),
        nodeId: "a-process-that-died",
      });
    } finally {
      await first.close();
    }

    const second = await startServer({}, { dataDir });
    try {
      await second.services.errorHandlers.idle();
      const crashed = `${runId}-crashed`;
      const shown = await second.call("GET", `${DF}/monitor/runs/${crashed}`, { headers: h });
      const stored = await second.services.store.getRun(null, crashed);
      assert.equal(stored?.status, "FAILURE", JSON.stringify(shown.body));
      assert.match(stored?.error ?? "", /restarted/);
      const hit = hook.hits.find((x) => x.path === "/recovered");
      assert.ok(hit, "the bot handler was called");
      assert.equal(hit.body.runId, crashed);
      assert.equal(hit.body.event, "run.failure");
      const results = await second.services.store.errorHandlerResults(crashed);
      assert.deepEqual(
        results.map((r) => [r.kind, r.ok]),
        [["bot", true]],
      );
      const metrics = await (await fetch(`${second.url}/metrics`)).text();
      assert.match(metrics, /sluice_runs_total\{[^}]*status="FAILURE"[^}]*\} 1/);
    } finally {
      await second.close();
      hook.close();
    }
  });
});
