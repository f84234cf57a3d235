import assert from "node:assert/strict";
import fs from "node:fs";
import path from "node:path";
import { after, before, describe, it } from "node:test";
import { createFileSweeper, retentionMs } from "../../src/runs/file-cleanup.ts";
import { DF, deployAndActivate } from "../helpers/flows.ts";
import { scopeHeaders, startServer, type TestServer } from "../helpers/server.ts";
import { pollUntil } from "../helpers/wait.ts";
import { createFakeClock } from "../scheduler/fake-clock.ts";

const DAY = 86_400_000;
const script = (code: string) => ({
  vertexes: [
    { id: "in", type: "input" },
    { id: "py", type: "script", config: { code } },
  ],
  edges: [{ source: "in", target: "py" }],
});
/** Writes a file into the run's working directory (its cwd), then finishes. */
const WRITER = script(
  "def main(p):\n    open('out.txt', 'w').write('x')\n    print('wrote')\n    return 'ok'\n",
);
/** Sleeps, then leaves a marker: if the marker appears after a timeout, the process was not killed. */
const LATE_MARKER = script(
  "import time\ndef main(p):\n    time.sleep(1.0)\n    open('marker.txt', 'w').write('alive')\n    return 'late'\n",
);

describe("runTimeout, logContent and fileCleanup", () => {
  let server: TestServer;
  const h = scopeHeaders();
  const runSync = async (elementName: string) => {
    const t0 = Date.now();
    const r = await server.call("POST", `${DF}/run-sync`, {
      headers: h,
      body: { elementName, parameter: { a: 1 } },
    });
    const run = await server.services.store.getRun(null, r.headers.get("x-run-id") ?? "");
    if (!run) throw new Error(`no run: ${r.text}`);
    return { run, ms: Date.now() - t0 };
  };
  const workDir = (runId: string) => path.join(server.dataDir, "tasks", runId);

  before(async () => {
    server = await startServer({ FILE_SWEEP_MS: "0" });
    await deployAndActivate(server, "customized", LATE_MARKER, {
      runTimeout: { type: "customized", seconds: 0.3 },
      fileCleanup: { type: "keep" },
    });
    await deployAndActivate(server, "detailed", WRITER, {
      logContent: "DETAILED",
      fileCleanup: { type: "keep" },
    });
    await deployAndActivate(server, "concise", WRITER, {
      logContent: "CONCISE",
      fileCleanup: { type: "keep" },
    });
    await deployAndActivate(server, "c-default", WRITER, {});
    await deployAndActivate(server, "c-afterrun", WRITER, { fileCleanup: { type: "afterRun" } });
    await deployAndActivate(server, "c-days", WRITER, { fileCleanup: { type: "days", days: 2 } });
  });
  after(() => server.close());

  it("customized: the run ends FAILURE within 0.5 s of the limit and its script is killed", async () => {
    const { run, ms } = await runSync("customized");
    assert.equal(run.status, "FAILURE");
    assert.match(run.error ?? "", /timed out after 0.3s/);
    assert.ok(ms < 300 + 500, `ended after ${ms} ms`);
    // The task's slot is freed once its pipes closed: this script holds them until it dies, so
    // from then on it can write nothing (its sleep would have ended at 1 s).
    await pollUntil(
      () => server.services.runner.stats().running,
      (n) => n === 0,
      "the killed task's process is gone",
    );
    assert.equal(
      fs.existsSync(path.join(workDir(run.id), "marker.txt")),
      false,
      "the script process was killed",
    );
  });

  it("logContent DETAILED keeps input, output and stdout; CONCISE only status, times and error", async () => {
    const d = (await runSync("detailed")).run.detail?.nodes as Record<string, unknown>[];
    const py = d.find((n) => n.nodeId === "py");
    assert.deepEqual(py?.input, { a: 1 });
    assert.equal(py?.output, "ok");
    assert.match(String(py?.stdout), /wrote/);
    const c = (await runSync("concise")).run.detail?.nodes as Record<string, unknown>[];
    for (const n of c) {
      assert.deepEqual(
        Object.keys(n).filter((k) => ["input", "output", "stdout", "stderr"].includes(k)),
        [],
      );
      assert.equal(n.status, "SUCCESS");
      assert.equal(typeof n.startTime, "number");
    }
  });

  it("fileCleanup: afterRun deletes at the end; default, days and keep wait for the sweeper", async () => {
    const runs: Record<string, { id: string; endTime: number }> = {};
    for (const name of ["c-default", "c-afterrun", "c-days", "detailed"]) {
      const { run } = await runSync(name);
      assert.equal(run.status, "SUCCESS");
      runs[name] = { id: run.id, endTime: run.endTime ?? 0 };
    }
    const exists = (name: string) => fs.existsSync(workDir(runs[name]?.id ?? "?"));
    assert.equal(exists("c-afterrun"), false, "afterRun: deleted as the run ended");
    assert.ok(exists("c-default") && exists("c-days") && exists("detailed"));
    assert.ok(
      fs.existsSync(path.join(workDir(runs["c-days"]?.id ?? "?"), "out.txt")),
      "the script's file is there",
    );

    const clock = createFakeClock(Date.now());
    const sweeper = createFileSweeper({
      store: server.services.store,
      clock,
      logger: { error() {} },
      config: { dataDir: server.dataDir, fileRetentionDays: 7, fileSweepMs: 0 },
    });
    const latest = Math.max(...Object.values(runs).map((r) => r.endTime));
    clock.set(latest + 1 * DAY);
    await sweeper.sweep();
    assert.ok(
      exists("c-default") && exists("c-days") && exists("detailed"),
      "nothing due after 1 day",
    );
    clock.set(latest + 2 * DAY + 1);
    await sweeper.sweep();
    assert.equal(exists("c-days"), false, "days: 2 → gone after 2 days");
    assert.ok(exists("c-default"));
    clock.set(latest + 7 * DAY + 1);
    await sweeper.sweep();
    assert.equal(exists("c-default"), false, "default: server retention (7 days)");
    clock.set(latest + 365 * DAY);
    await sweeper.sweep();
    assert.ok(exists("detailed"), "keep: kept");
  });

  it("retention per policy", () => {
    assert.equal(retentionMs({ type: "keep" }, 7), null);
    assert.equal(retentionMs({ type: "afterRun" }, 7), 0);
    assert.equal(retentionMs({ type: "days", days: 3 }, 7), 3 * DAY);
    assert.equal(retentionMs({ type: "default" }, 5), 5 * DAY);
  });
});

describe("runTimeout system", () => {
  let server: TestServer;
  before(async () => {
    server = await startServer({ MAX_RUN_S: "1" });
    await deployAndActivate(
      server,
      "slow",
      script("import time\ndef main(p):\n    time.sleep(5)\n"),
      {},
    );
  });
  after(() => server.close());

  it("the server's limit ends the run FAILURE (timed out) within 0.5 s", async () => {
    const t0 = Date.now();
    const r = await server.call("POST", `${DF}/run-sync`, {
      headers: scopeHeaders(),
      body: { elementName: "slow", parameter: {} },
    });
    const ms = Date.now() - t0;
    const run = await server.services.store.getRun(null, r.headers.get("x-run-id") ?? "");
    assert.equal(run?.status, "FAILURE");
    assert.match(run?.error ?? "", /timed out: it exceeded the system limit of 1s \(MAX_RUN_S\)$/);
    assert.ok(ms < 1000 + 500, `ended after ${ms} ms`);
  });
});
