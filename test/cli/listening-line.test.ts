import assert from "node:assert/strict";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { after, describe, it } from "node:test";
import { killHard, startProcess } from "../helpers/process.ts";

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
});
