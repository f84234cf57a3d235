import assert from "node:assert/strict";
import fs from "node:fs";
import path from "node:path";
import { after, before, describe, it } from "node:test";
import { createFileSweeper } from "../../src/runs/file-cleanup.ts";
import { DF, deployAndActivate } from "../helpers/flows.ts";
import { scopeHeaders, startServer, type TestServer } from "../helpers/server.ts";
import { createFakeClock } from "../scheduler/fake-clock.ts";

const DAY = 86_400_000;
/** Writes a file into the run's working directory (its cwd), then finishes. */
const WRITER = {
  vertexes: [
    { id: "in", type: "input" },
    {
      id: "py",
      type: "script",
      config: { code: "def main(p):\n    open('out.txt', 'w').write('x')\n    return 'ok'\n" },
    },
  ],
  edges: [{ source: "in", target: "py" }],
};

/**
 * A run's fileCleanup is read from its revision; once LIMIT_REVISIONS_PER_FLOW has removed that
 * revision (docs/dataflow-service.md), the policy is unknown, and its files are kept until the
 * run itself is deleted (docs/error-handlers.md, "fileCleanup"): never removed sooner than its
 * flow said.
 */
describe("fileCleanup of a run whose revision was removed", () => {
  let server: TestServer;
  const h = scopeHeaders();
  before(async () => {
    server = await startServer({ FILE_SWEEP_MS: "0", LIMIT_REVISIONS_PER_FLOW: "2" });
  });
  after(() => server.close());

  it("keeps the run's directory", async () => {
    await deployAndActivate(server, "kept", WRITER, { fileCleanup: { type: "keep" } });
    const r = await server.call("POST", `${DF}/run-sync`, {
      headers: h,
      body: { elementName: "kept", parameter: {} },
    });
    const runId = r.headers.get("x-run-id") ?? "";
    const run = await server.services.store.getRun(null, runId);
    assert.equal(run?.status, "SUCCESS", r.text);
    // Two more releases: the third deploy removes revision 1, the run's.
    await deployAndActivate(server, "kept", WRITER, { fileCleanup: { type: "keep" } });
    await deployAndActivate(server, "kept", WRITER, { fileCleanup: { type: "keep" } });
    assert.equal(await server.services.store.flowRevision(run?.elementId ?? "", 1), undefined);

    const clock = createFakeClock((run?.endTime ?? 0) + 365 * DAY);
    const sweeper = createFileSweeper({
      store: server.services.store,
      clock,
      logger: { error() {} },
      config: { dataDir: server.dataDir, fileRetentionDays: 7, fileSweepMs: 0 },
    });
    assert.deepEqual(await sweeper.sweep(), []);
    assert.ok(fs.existsSync(path.join(server.dataDir, "tasks", runId, "out.txt")));
  });
});
