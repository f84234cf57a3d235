import assert from "node:assert/strict";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { describe, it } from "node:test";
import { DF } from "../helpers/flows.ts";
import { killHard, startProcess } from "../helpers/process.ts";
import { modeEnv, scopeHeaders } from "../helpers/server.ts";
import { pollUntil } from "../helpers/wait.ts";

/**
 * kill -9 after a `keep` run's end is recorded, while its files are being kept as artifacts
 * (docs/artifacts.md), then restart on the same data directory and database: the run's files
 * are still kept, not left `collected: false` for good.
 */
const h = { ...scopeHeaders(), "content-type": "application/json" };
const FILES = 400;

const WRITER = {
  vertexes: [
    { id: "in", type: "input" },
    {
      id: "w",
      type: "script",
      config: {
        code: [
          "def main(p):",
          `    for i in range(${FILES}):`,
          "        open(f'f{i:03}.bin', 'wb').write(b'x' * 100_000)",
          "    return 'w'",
          "",
        ].join("\n"),
      },
    },
  ],
  edges: [{ source: "in", target: "w" }],
};

/** What the calls here answer: a run-sync's output, an artifact listing. */
type Listing = {
  collected?: boolean;
  files: { name: string; nodeId: string | null }[];
  skipped: unknown[];
} | null;

async function call(url: string, method: string, p: string, body?: unknown) {
  const r = await fetch(url + p, {
    method,
    headers: h,
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  return { headers: r.headers, body: (await r.json()) as { status: boolean; data: Listing } };
}

describe("kill -9 while a run's files are kept", () => {
  it("keeps them after the restart", async () => {
    const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), "sluice-crash-artifacts-"));
    const env = { DATA_DIR: dataDir, SCRIPT_PREFORK: "1", ...(await modeEnv()) };
    let proc = await startProcess(env);
    try {
      const deployed = await call(proc.url, "POST", `${DF}/flow/deploy`, {
        elementName: "keeper",
        revisionName: "r",
        path: "/",
        flow: WRITER,
        configure: { fileCleanup: { type: "keep" } },
      });
      assert.equal(deployed.body.status, true, JSON.stringify(deployed.body));
      await call(proc.url, "POST", `${DF}/flow/activate`, { elementName: "keeper" });
      const ran = await call(proc.url, "POST", `${DF}/run-sync`, { elementName: "keeper" });
      // The answer comes once the end is recorded; the files are kept after it: killed now.
      await killHard(proc.child);
      assert.equal(ran.body.status, true, JSON.stringify(ran.body));
      const runId = ran.headers.get("x-run-id") ?? "";
      const kept = path.join(dataDir, "tasks", runId);
      assert.equal(fs.readdirSync(kept).length, FILES, "the run's files are on disk");

      proc = await startProcess(env);
      const list = await pollUntil(
        async () => (await call(proc.url, "GET", `${DF}/run/${runId}/artifacts`)).body,
        (b) => b.data?.collected === true,
        "the run's artifacts collected after the restart",
        { ms: 60_000 },
      );
      const files = list.data?.files ?? [];
      assert.equal(files.length, FILES, JSON.stringify(list.data?.skipped));
      assert.equal(new Set(files.map((f) => f.name)).size, FILES, "each file once");
      // Kept at the restart, its files are no node's: the kill came before the collection's end.
      assert.ok(
        files.some((f) => f.nodeId === null),
        "the kill came after the collection",
      );
    } finally {
      await killHard(proc.child);
      fs.rmSync(dataDir, { recursive: true, force: true });
    }
  });
});
