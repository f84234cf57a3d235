import assert from "node:assert/strict";
import fs from "node:fs";
import http from "node:http";
import type { AddressInfo } from "node:net";
import os from "node:os";
import path from "node:path";
import { after, describe, it } from "node:test";
import { DF } from "../helpers/flows.ts";
import { gatedScript } from "../helpers/gate-file.ts";
import { killHard, startProcess } from "../helpers/process.ts";
import { modeEnv, scopeHeaders } from "../helpers/server.ts";
import { type Condition, condition, pollUntil } from "../helpers/wait.ts";

const FAILING = {
  vertexes: [
    { id: "in", type: "input" },
    {
      id: "py",
      type: "script",
      config: { code: "def main(p):\n    raise RuntimeError('boom')\n" },
    },
  ],
  edges: [{ source: "in", target: "py" }],
};

const h = { ...scopeHeaders(), "content-type": "application/json" };
const post = async (url: string, body: unknown) =>
  (await fetch(url, { method: "POST", headers: h, body: JSON.stringify(body) })).json() as Promise<{
    status: boolean;
    data: unknown;
  }>;

// biome-ignore lint/suspicious/noExplicitAny: tests read arbitrary JSON.
type Json = any;

/**
 * A chat webhook that holds its first post unanswered (the process is killed while it waits) and
 * takes every later one. Each post's JSON is kept; `cond` tells of each arrival.
 */
async function holdingReceiver(): Promise<{ url: string; posts: Json[]; cond: Condition }> {
  const posts: Json[] = [];
  const cond = condition();
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on("data", (c: Buffer) => chunks.push(c));
    req.on("end", () => {
      posts.push(JSON.parse(Buffer.concat(chunks).toString("utf8")));
      cond.changed();
      if (posts.length === 1) return; // held: the sender dies waiting for the answer
      res.end("ok");
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  after(() => {
    server.closeAllConnections();
    server.close();
  });
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, posts, cond };
}

/** The runs of flow `name` in the test's scope, newest first (at most 100). */
async function runsOf(url: string, name: string): Promise<{ runId: string; runStatus: string }[]> {
  const r = await post(`${url}${DF}/monitor/runs`, {
    pageNo: 0,
    pageSize: 100,
    elementName: name,
    path: "/f",
  });
  return (r.data as Json).runs;
}

/** A flow whose script waits for a `go` file in its working directory (test/helpers/gate-file.ts). */
const GATED = {
  vertexes: [
    { id: "in", type: "input" },
    { id: "py", type: "script", config: { code: gatedScript([], []) } },
    { id: "out", type: "output" },
  ],
  edges: [
    { source: "in", target: "py" },
    { source: "py", target: "out" },
  ],
};

async function deploy(url: string, name: string, flow: unknown, configure: unknown) {
  await post(`${url}${DF}/flow/deploy`, {
    elementName: name,
    revisionName: "r1",
    path: "/f",
    flow,
    configure,
  });
  await post(`${url}${DF}/flow/activate`, { elementName: name, path: "/f" });
}

describe("error-handler notifications survive kill -9 (docs/error-handlers.md)", () => {
  it("a FAILURE's notification under way when the process dies is sent after the restart and recorded", async () => {
    const hook = await holdingReceiver();
    const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), "sluice-notify-crash-"));
    after(() => fs.rmSync(dataDir, { recursive: true, force: true }));
    const env = {
      DATA_DIR: dataDir,
      SCRIPT_PREFORK: "1",
      HEARTBEAT_MS: "300",
      HEARTBEAT_TIMEOUT_MS: "1500",
      // The held first attempt outlasts the test: the process dies in it, not after it.
      WEBHOOK_TIMEOUT_MS: "60000",
      ...(await modeEnv()),
    };
    const first = await startProcess(env);
    after(() => killHard(first.child));
    await post(`${first.url}${DF}/flow/deploy`, {
      elementName: "failing",
      revisionName: "r1",
      path: "/f",
      flow: FAILING,
      configure: { errorHandlers: { bot: { webhookUrl: `${hook.url}/generic` } } },
    });
    await post(`${first.url}${DF}/flow/activate`, { elementName: "failing", path: "/f" });
    const run = await post(`${first.url}${DF}/run-sync`, { elementName: "failing", parameter: {} });
    assert.equal(run.status, false, "the run failed");
    // The FAILURE is recorded (the run-sync answered it) and the first attempt is under way.
    await hook.cond.until(() => hook.posts.length === 1, "the first attempt reached the receiver");
    const runId = hook.posts[0].runId as string;
    assert.equal(hook.posts[0].event, "run.failure");
    await killHard(first.child);

    const second = await startProcess(env);
    after(() => killHard(second.child));
    await hook.cond.until(
      () => hook.posts.length >= 2,
      "the notification was sent again after the restart",
      20_000,
    );
    assert.equal(hook.posts[1].runId, runId, "the same run's notification (runId + event)");
    assert.equal(hook.posts[1].event, "run.failure");
    // Nothing announces the record to this test: read over HTTP until it shows.
    const shown = await pollUntil(
      async () =>
        (
          (await (
            await fetch(`${second.url}${DF}/monitor/run?runId=${runId}`, { headers: h })
          ).json()) as Json
        ).data,
      (d: Json) => Array.isArray(d?.errorHandlerResults) && d.errorHandlerResults.length > 0,
      "the handler's outcome is recorded on the run",
    );
    assert.deepEqual(
      shown.errorHandlerResults.map((r: Json) => [r.kind, r.ok, r.event]),
      [["bot", true, "run.failure"]],
    );
    assert.equal(hook.posts.length, 2, "sent once more, not again and again");
  });

  it("a custom handler's run created before the process died is found after the restart, not started again", async () => {
    const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), "sluice-notify-crash-custom-"));
    after(() => fs.rmSync(dataDir, { recursive: true, force: true }));
    const env = {
      DATA_DIR: dataDir,
      SCRIPT_PREFORK: "1",
      HEARTBEAT_MS: "300",
      HEARTBEAT_TIMEOUT_MS: "1500",
      // One attempt: the handler's run that died with the process is that attempt, and its end
      // (failed by recovery) is the outcome; a retry would rightly start the next attempt's run.
      ERROR_HANDLER_ATTEMPTS: "1",
      ...(await modeEnv()),
    };
    const first = await startProcess(env);
    after(() => killHard(first.child));
    await deploy(first.url, "handler", GATED, {});
    await deploy(first.url, "failing-custom", FAILING, {
      errorHandlers: {
        custom: { element: { elementName: "handler", elementType: "DPL", path: "/f" } },
      },
    });
    const run = await post(`${first.url}${DF}/run-sync`, {
      elementName: "failing-custom",
      parameter: {},
    });
    assert.equal(run.status, false, "the run failed");
    const [failed] = await runsOf(first.url, "failing-custom");
    const dirOf = (runId: string) => path.join(dataDir, "tasks", runId);
    // The handler's run is created and executing (its script waits for a file that never comes):
    // its outcome cannot be recorded before the kill.
    const [started] = await pollUntil(
      () => runsOf(first.url, "handler"),
      (rs) =>
        rs.length === 1 && rs[0]?.runStatus === "STARTED" && fs.existsSync(dirOf(rs[0].runId)),
      "the custom handler's run is executing",
      { ms: 20_000 },
    );
    assert.ok(failed && started);
    await killHard(first.child);

    const second = await startProcess(env);
    after(() => killHard(second.child));
    // A second handler run, if one is started, is let through at once: the outcome is then
    // recorded quickly, and the count below tells.
    const shown = await pollUntil(
      async () => {
        for (const r of await runsOf(second.url, "handler")) {
          if (r.runId !== started.runId && fs.existsSync(dirOf(r.runId)))
            fs.writeFileSync(path.join(dirOf(r.runId), "go"), "");
        }
        const res = await fetch(`${second.url}${DF}/monitor/run?runId=${failed.runId}`, {
          headers: h,
        });
        return ((await res.json()) as Json).data;
      },
      (d: Json) => Array.isArray(d?.errorHandlerResults) && d.errorHandlerResults.length > 0,
      "the custom handler's outcome is recorded after the restart",
      { ms: 30_000 },
    );
    assert.deepEqual(
      (await runsOf(second.url, "handler")).map((r) => r.runId),
      [started.runId],
      "exactly one handler run: the one started before the kill",
    );
    assert.deepEqual(
      shown.errorHandlerResults.map((r: Json) => [r.kind, r.ok, r.runId, r.event]),
      [["custom", false, started.runId, "run.failure"]],
      "its end (failed with the process) is the outcome",
    );
  });
});
