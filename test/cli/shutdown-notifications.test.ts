import assert from "node:assert/strict";
import type { ChildProcess } from "node:child_process";
import fs from "node:fs";
import http from "node:http";
import type { AddressInfo } from "node:net";
import os from "node:os";
import path from "node:path";
import { after, describe, it } from "node:test";
import { DF } from "../helpers/flows.ts";
import { startProcess } from "../helpers/process.ts";
import { SCOPE } from "../helpers/server.ts";
import { type Condition, condition } from "../helpers/wait.ts";

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

const headers = { "content-type": "application/json", ...SCOPE };
const post = async (url: string, body: unknown) =>
  (await fetch(url, { method: "POST", headers, body: JSON.stringify(body) })).json();

function exited(child: ChildProcess): Promise<number | null> {
  return new Promise((resolve) =>
    child.exitCode !== null ? resolve(child.exitCode) : child.once("exit", (code) => resolve(code)),
  );
}

/** A chat webhook that refuses its first post (500) and takes every later one. */
async function flakyReceiver(): Promise<{ url: string; answers: number[]; cond: Condition }> {
  const answers: number[] = [];
  const cond = condition();
  const server = http.createServer((req, res) => {
    req.resume();
    req.on("end", () => {
      const code = answers.length === 0 ? 500 : 200;
      answers.push(code);
      res.statusCode = code;
      res.end('{"errcode":0}');
      cond.changed();
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  after(() => server.close());
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, answers, cond };
}

/** A failed run whose bot notification waits for its second attempt when SIGTERM comes. */
async function stopWhileNotifying(env: Record<string, string>) {
  const hook = await flakyReceiver();
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), "sluice-shutdown-notify-"));
  after(() => fs.rmSync(dataDir, { recursive: true, force: true }));
  const proc = await startProcess({ DATA_DIR: dataDir, SCRIPT_PREFORK: "1", ...env });
  await post(`${proc.url}${DF}/flow/deploy`, {
    elementName: "failing",
    revisionName: "r1",
    path: "/f",
    flow: FAILING,
    configure: { errorHandlers: { bot: { webhookUrl: `${hook.url}/generic` } } },
  });
  await post(`${proc.url}${DF}/flow/activate`, { elementName: "failing", path: "/f" });
  const run = await post(`${proc.url}${DF}/run-sync`, { elementName: "failing", parameter: {} });
  assert.equal(run.status, false, "the run failed");
  await hook.cond.until(() => hook.answers.length === 1, "the first attempt, refused");
  const t0 = Date.now();
  proc.child.kill("SIGTERM");
  const code = await exited(proc.child);
  return { code, took: Date.now() - t0, answers: hook.answers, output: proc.output() };
}

describe("graceful shutdown and error-handler notifications (docs/operations.md)", () => {
  it("a notification waiting to be tried again is sent before the process exits", async () => {
    const { code, answers, output } = await stopWhileNotifying({
      ERROR_HANDLER_BACKOFF_MS: "1500",
      SHUTDOWN_GRACE_S: "20",
    });
    assert.equal(code, 0, output);
    assert.deepEqual(answers, [500, 200], "the second attempt reached the receiver");
  });

  it("the grace period bounds the wait: what is still unsent is logged, the process exits", async () => {
    const { code, took, answers, output } = await stopWhileNotifying({
      ERROR_HANDLER_BACKOFF_MS: "60000",
      SHUTDOWN_GRACE_S: "1",
    });
    assert.equal(code, 0, output);
    assert.deepEqual(answers, [500], "no second attempt within the grace period");
    assert.ok(took < 10_000, `exited ${took} ms after SIGTERM`);
    assert.match(output, /error-handler notifications not sent/);
  });
});
