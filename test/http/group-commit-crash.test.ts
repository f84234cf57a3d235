import assert from "node:assert/strict";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { describe, it } from "node:test";
import { DF, NO_SCRIPT_FLOW } from "../helpers/flows.ts";
import { killHard, startProcess } from "../helpers/process.ts";
import { modeEnv, scopeHeaders } from "../helpers/server.ts";

const h = { ...scopeHeaders(), "content-type": "application/json" };
const ORDERS = { orders: [{ amount: 2, qty: 3 }] };

/**
 * Group commit (docs/architecture.md, "Group commit") must not answer a run before its batch
 * committed: the process is killed while callers keep it busy, and every run ID it answered
 * is found after a restart.
 */
describe("kill -9 during group commits under load", () => {
  it("every run answered before the kill is in the store after a restart", async () => {
    const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), "sluice-gc-crash-"));
    const env = {
      DATA_DIR: dataDir,
      HEARTBEAT_MS: "300",
      HEARTBEAT_TIMEOUT_MS: "1500",
      ...(await modeEnv()),
    };
    const first = await startProcess(env);
    const post = (p: string, body: unknown) =>
      fetch(first.url + p, { method: "POST", headers: h, body: JSON.stringify(body) });
    await post(`${DF}/flow/deploy`, {
      elementName: "plain",
      revisionName: "r",
      path: "/",
      flow: NO_SCRIPT_FLOW,
      configure: { logContent: "CONCISE" },
    });
    await post(`${DF}/flow/activate`, { elementName: "plain" });

    const answered: string[] = [];
    let killing: Promise<void> | undefined;
    const caller = async (i: number) => {
      for (let n = 0; !killing; n++) {
        try {
          const sync = (i + n) % 2 === 0;
          const r = await post(sync ? `${DF}/run-sync` : `${DF}/run`, {
            elementName: "plain",
            parameter: ORDERS,
          });
          const body = (await r.json()) as { status: boolean; data: unknown };
          if (!body.status) throw new Error(JSON.stringify(body));
          answered.push(sync ? (r.headers.get("x-run-id") ?? "") : (body.data as string));
        } catch (err) {
          if (killing) return; // the connection died with the process
          throw err;
        }
        // The kill lands while the other callers' requests are in flight.
        if (answered.length === 400) killing = killHard(first.child);
      }
    };
    await Promise.all(Array.from({ length: 16 }, (_, i) => caller(i)));
    await killing;
    assert.ok(answered.length >= 400);

    const second = await startProcess(env);
    try {
      const missing: string[] = [];
      for (const id of answered) {
        const r = await fetch(`${second.url}${DF}/monitor/run?runId=${id}`, { headers: h });
        const body = (await r.json()) as { status: boolean; code: number };
        if (!body.status) missing.push(`${id}: ${body.code}`);
      }
      assert.deepEqual(missing, [], `${missing.length} of ${answered.length} answered runs lost`);
    } finally {
      await killHard(second.child);
      fs.rmSync(dataDir, { recursive: true, force: true });
    }
  });
});
