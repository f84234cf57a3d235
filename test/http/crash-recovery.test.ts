import assert from "node:assert/strict";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { describe, it } from "node:test";
import { DF, NO_SCRIPT_FLOW } from "../helpers/flows.ts";
import { killHard, startProcess } from "../helpers/process.ts";
import { processesOf } from "../helpers/process-tree.ts";
import { modeEnv, scopeHeaders } from "../helpers/server.ts";
import { pollUntil } from "../helpers/wait.ts";

const h = { ...scopeHeaders(), "content-type": "application/json" };
const post = async (url: string, p: string, body: unknown) =>
  (
    await fetch(url + p, { method: "POST", headers: h, body: JSON.stringify(body) })
  ).json() as Promise<{ status: boolean; code: number; data: unknown }>;

describe("kill -9 mid-run, then restart", () => {
  it("loses no accepted run: running ones end FAILURE with a reason, queued ones complete", async () => {
    const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), "sluice-crash-"));
    // One flow slot: the sleeper holds it, so every other accepted run is still QUEUED at the kill.
    const env = {
      DATA_DIR: dataDir,
      FLOW_CONCURRENCY: "1",
      SCRIPT_PREFORK: "1",
      HEARTBEAT_MS: "300",
      HEARTBEAT_TIMEOUT_MS: "1500",
      ...(await modeEnv()),
    };
    const first = await startProcess(env);
    const sleeper = {
      vertexes: [
        { id: "in", type: "input" },
        {
          id: "py",
          type: "script",
          config: {
            code: "import os, time\ndef main(p):\n    open('uid', 'w').write(str(os.getuid()))\n    time.sleep(60)\n",
          },
        },
      ],
      edges: [{ source: "in", target: "py" }],
    };
    for (const [name, flow] of [
      ["sleeper", sleeper],
      ["plain", NO_SCRIPT_FLOW],
    ] as const) {
      await post(first.url, `${DF}/flow/deploy`, {
        elementName: name,
        revisionName: "r",
        path: "/",
        flow,
        configure: {},
      });
      await post(first.url, `${DF}/flow/activate`, { elementName: name });
    }
    const sleeping = (await post(first.url, `${DF}/run`, { elementName: "sleeper", parameter: {} }))
      .data as string;
    // The sleeper holds the one flow slot once its script runs: it writes its uid first. The file
    // is another process's, and nothing announces it: read by the shared poll.
    const tasks = path.join(dataDir, "tasks");
    const uidFiles = () =>
      (fs.existsSync(tasks) ? fs.readdirSync(tasks, { withFileTypes: true }) : [])
        .filter((d) => d.isDirectory())
        .map((d) => path.join(tasks, d.name, "uid"))
        .filter((f) => fs.existsSync(f) && fs.readFileSync(f, "utf8") !== "");
    await pollUntil(uidFiles, (f) => f.length === 1, "the sleeper's script wrote its uid");
    const queued: string[] = [];
    for (let i = 0; i < 20; i++) {
      const r = await post(first.url, `${DF}/run`, {
        elementName: "plain",
        parameter: { orders: [{ amount: i, qty: 1 }] },
      });
      assert.equal(r.status, true);
      queued.push(r.data as string);
    }
    await killHard(first.child);
    // The killed service's script process dies with it: nothing is left running on the host.
    // (Its pid is its own pid namespace's; its uid, private to it, finds it from here.)
    const uids = uidFiles().map((f) => Number(fs.readFileSync(f, "utf8")));
    assert.equal(uids.length, 1, "the sleeper wrote its uid");
    const left = () => uids.flatMap((uid) => processesOf(uid));
    // Another process tree's: their exits are announced to nobody here, so the shared poll.
    await pollUntil(
      left,
      (pids) => pids.length === 0,
      "script processes outlived the killed service",
      {
        ms: 5000,
      },
    );

    const second = await startProcess(env);
    try {
      const res = await fetch(`${second.url}${DF}/run/${sleeping}/result?timeout=5`, {
        headers: h,
      });
      const body = (await res.json()) as { code: number; message: string };
      assert.equal(body.code, 28020004);
      // Embedded: the restart itself fails it; cluster: the live node notices the missing heartbeat.
      assert.match(body.message, /restarted|heartbeats/);
      for (const id of queued) {
        const r = (await (
          await fetch(`${second.url}${DF}/run/${id}/result?timeout=10`, { headers: h })
        ).json()) as { status: boolean };
        assert.equal(r.status, true, `run ${id} completed after restart`);
      }
    } finally {
      await killHard(second.child);
      fs.rmSync(dataDir, { recursive: true, force: true });
    }
  });
});
