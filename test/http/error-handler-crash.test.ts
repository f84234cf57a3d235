import assert from "node:assert/strict";
import fs from "node:fs";
import http from "node:http";
import type { AddressInfo } from "node:net";
import os from "node:os";
import path from "node:path";
import { after, describe, it } from "node:test";
import { DF } from "../helpers/flows.ts";
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
});
