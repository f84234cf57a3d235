import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { once } from "node:events";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { after, describe, it } from "node:test";
import { BIN, freePort, killHard, startProcess } from "../helpers/process.ts";

/**
 * docs/operations.md, "Start-up" (when it is up): once it listens, `sluice` writes one line on
 * stderr whatever LOG_LEVEL says, naming the address it bound.
 */
describe("sluice says once that it listens", () => {
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), "sluice-listening-"));
  after(() => fs.rmSync(dataDir, { recursive: true, force: true }));

  it("with LOG_LEVEL=silent and PORT=0: that line alone, with the port the system chose", async () => {
    const p = await startProcess({
      DATA_DIR: dataDir,
      SCRIPT_PREFORK: "1",
      LOG_LEVEL: "silent",
      PORT: "0",
    });
    try {
      const port = Number(new URL(p.url).port);
      assert.ok(port > 0, p.url);
      assert.equal(p.output(), `sluice: listening on http://127.0.0.1:${port}\n`);
      assert.equal((await fetch(`${p.url}/health`)).status, 200);
    } finally {
      await killHard(p.child);
    }
  });

  it("with its stderr closed by whoever started it: still serves (the line is dropped)", async () => {
    const port = await freePort();
    const child = spawn(process.execPath, [BIN, "serve"], {
      env: {
        ...process.env,
        DATA_DIR: fs.mkdtempSync(path.join(dataDir, "closed-")),
        SCRIPT_PREFORK: "1",
        LOG_LEVEL: "info",
        PORT: String(port),
        HOST: "127.0.0.1",
      },
      stdio: ["ignore", "pipe", "pipe"],
    });
    child.stderr.destroy();
    let ready = "";
    const said = new Promise<void>((resolve) => {
      child.stdout.on("data", (c) => {
        ready += c;
        if (ready.includes('"msg":"sluice is ready"')) resolve();
      });
    });
    const exited = once(child, "exit").then(() => "exited" as const);
    try {
      assert.notEqual(await Promise.race([said.then(() => "ready" as const), exited]), "exited");
      // The line is written right after the ready log; then a request, answered.
      assert.equal((await fetch(`http://127.0.0.1:${port}/health`)).status, 200);
      assert.equal((await fetch(`http://127.0.0.1:${port}/health`)).status, 200);
      assert.equal(child.exitCode, null, "still running");
    } finally {
      await killHard(child);
    }
  });
});
