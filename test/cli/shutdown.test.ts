import assert from "node:assert/strict";
import type { ChildProcess } from "node:child_process";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { describe, it } from "node:test";
import { DF } from "../helpers/flows.ts";
import { startProcess } from "../helpers/process.ts";
import { SCOPE, startServer } from "../helpers/server.ts";
import { pollUntil } from "../helpers/wait.ts";

const SLEEPY = {
  vertexes: [
    { id: "in", type: "input" },
    {
      id: "py",
      type: "script",
      config: { code: "import time\ndef main(p):\n    time.sleep(p['s'])\n    return 'done'\n" },
    },
  ],
  edges: [{ source: "in", target: "py" }],
};

const headers = { "content-type": "application/json", ...SCOPE };
const post = async (url: string, body: unknown) =>
  (await fetch(url, { method: "POST", headers, body: JSON.stringify(body) })).json();

function exited(child: ChildProcess): Promise<number | null> {
  return new Promise((resolve) =>
    child.exitCode !== null ? resolve(child.exitCode) : child.once("exit", (code) => resolve(code)),
  );
}

/** Starts a sleeping run on a real `sluice serve`, sends SIGTERM once it executes, and reads the run back. */
async function shutdownDuring(graceS: number, sleepS: number) {
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), "sluice-shutdown-"));
  const proc = await startProcess({
    DATA_DIR: dataDir,
    SHUTDOWN_GRACE_S: String(graceS),
    SCRIPT_PREFORK: "1",
  });
  await post(`${proc.url}${DF}/flow/deploy`, {
    elementName: "sleepy",
    revisionName: "r1",
    path: "/f",
    flow: SLEEPY,
    configure: {},
  });
  await post(`${proc.url}${DF}/flow/activate`, { elementName: "sleepy", path: "/f" });
  const runId = (
    await post(`${proc.url}${DF}/run`, { elementName: "sleepy", parameter: { s: sleepS } })
  ).data as string;
  // The record is another process's (SQLite): nothing announces its start, so the shared poll.
  await pollUntil(
    async () =>
      (
        (await (
          await fetch(`${proc.url}${DF}/monitor/run?runId=${runId}`, { headers })
        ).json()) as { data?: { runStatus?: string } }
      ).data?.runStatus,
    (s) => s === "STARTED",
    `run ${runId} STARTED`,
    { ms: 5000, everyMs: 50 },
  );
  const t0 = Date.now();
  proc.child.kill("SIGTERM");
  const code = await exited(proc.child);
  const took = Date.now() - t0;
  // A clean exit closes every connection; the last to close (the checkpoint worker's) checkpoints
  // the WAL into the database file and removes it.
  const walLeft = fs.existsSync(path.join(dataDir, "sluice.db-wal"));
  const server = await startServer({}, { dataDir });
  try {
    const r = await server.call("GET", `${DF}/monitor/run?runId=${runId}`, {
      headers: { ...SCOPE },
    });
    return { code, took, walLeft, run: r.body.data, output: proc.output() };
  } finally {
    await server.close();
  }
}

describe("graceful shutdown (SIGTERM)", () => {
  it("lets a running task finish within the grace period", async () => {
    const { code, walLeft, run, output } = await shutdownDuring(20, 1);
    assert.equal(code, 0, output);
    assert.equal(walLeft, false, "the WAL outlived the process: a connection was never closed");
    assert.equal(run.runStatus, "SUCCESS", JSON.stringify(run));
  });

  it("fails what is still running at the deadline, with a message, and exits", async () => {
    const { code, took, walLeft, run, output } = await shutdownDuring(1, 60);
    assert.equal(code, 0, output);
    assert.equal(walLeft, false, "the WAL outlived the process: a connection was never closed");
    assert.ok(took < 10_000, `took ${took} ms`);
    assert.equal(run.runStatus, "FAILURE");
    assert.match(run.summary, /shut down before this run ended/);
  });
});
