import assert from "node:assert/strict";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { after, describe, it } from "node:test";
import { DF } from "../helpers/flows.ts";
import { release } from "../helpers/gate-file.ts";
import { killHard, startProcess } from "../helpers/process.ts";
import { SCOPE } from "../helpers/server.ts";

/**
 * A tenant queues many runs with large parameters behind a flow that runs one at a time. The
 * embedded store's queue kept each waiting run's record and parsed parameter in memory until it
 * started: forty runs of 8 MiB exhausted a 256 MiB heap and the process died with every tenant's
 * work (docs/run-limits.md, "Queued runs").
 */
const QUEUED = 40;

// Only the first run (parameter `gate`) waits for its `go` file; the others pass at once.
const GATED = {
  vertexes: [
    { id: "in", type: "input" },
    {
      id: "py",
      type: "script",
      config: {
        code: [
          "import os, time",
          "def main(p):",
          "    if p.get('gate'):",
          "        for _ in range(1200):",
          "            if os.path.exists('go'):",
          "                break",
          "            time.sleep(0.05)",
          "    return len(p.get('orders', []))",
        ].join("\n"),
      },
    },
  ],
  edges: [{ source: "in", target: "py" }],
};

const headers = { "content-type": "application/json", ...SCOPE };

describe("queued runs with large parameters (embedded queue)", () => {
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), "sluice-queued-params-"));
  after(() => fs.rmSync(dataDir, { recursive: true, force: true }));

  it("do not hold their parameters in memory while they wait", async () => {
    const server = await startProcess({
      DATA_DIR: dataDir,
      NODE_OPTIONS: "--max-old-space-size=256",
      SCRIPT_PREFORK: "1",
    });
    const post = async (p: string, body: unknown) => {
      const r = await fetch(server.url + p, {
        method: "POST",
        headers,
        body: typeof body === "string" ? body : JSON.stringify(body),
      });
      return (await r.json()) as { status: boolean; data: unknown; message?: string };
    };
    try {
      await post(`${DF}/flow/deploy`, {
        elementName: "one-at-a-time",
        revisionName: "r",
        path: "/",
        flow: GATED,
        configure: {
          maxConcurrentRuns: 1,
          logContent: "CONCISE",
          fileCleanup: { type: "afterRun" },
        },
      });
      await post(`${DF}/flow/activate`, { elementName: "one-at-a-time" });
      const first = await post(`${DF}/run`, {
        elementName: "one-at-a-time",
        parameter: { gate: true },
      });
      assert.equal(first.status, true, JSON.stringify(first));

      const orders = Array.from({ length: 90_000 }, (_, i) => ({
        amount: i,
        note: "x".repeat(64),
      }));
      const big = JSON.stringify({ elementName: "one-at-a-time", parameter: { orders } });
      const ids: string[] = [];
      for (let i = 0; i < QUEUED; i++) {
        const r = await post(`${DF}/run`, big);
        assert.equal(
          r.status,
          true,
          `run ${i}: ${JSON.stringify(r).slice(0, 300)}\n${server.output().slice(-2000)}`,
        );
        ids.push(r.data as string);
      }
      assert.equal(server.child.exitCode, null, server.output().slice(-2000));

      // Queued runs still get their parameters: the first two kept in memory (16 MiB), the next
      // two read back from the store when they start. The rest would only repeat the second
      // path, at a quarter of a second of Python each; the process is killed with them queued.
      await release(dataDir, first.data as string);
      for (const id of ids.slice(0, 4)) {
        const res = await fetch(`${server.url}${DF}/run/${id}/result?timeout=120`, { headers });
        const body = (await res.json()) as { status: boolean; data: unknown };
        assert.equal(body.status, true, JSON.stringify(body).slice(0, 300));
        assert.equal(body.data, orders.length);
      }
    } catch (err) {
      throw new Error(`${String(err)}; the service said:\n${server.output().slice(-1500)}`);
    } finally {
      await killHard(server.child);
    }
  });
});
