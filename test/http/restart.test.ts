import assert from "node:assert/strict";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { describe, it } from "node:test";
import { openFilesUnder } from "../helpers/open-files.ts";
import { scopeHeaders, startServer, TEST_MODE, upload } from "../helpers/server.ts";

// Embedded mode re-queues from the runs table at start; in cluster mode queued jobs live in pg-boss
// and dead nodes are found by heartbeat, which test/http/crash-recovery.test.ts covers.
const embeddedOnly = TEST_MODE === "cluster" ? "embedded-mode recovery path" : false;

describe("restart recovery", { skip: embeddedOnly }, () => {
  it("ends tasks that were running FAILURE with a message and runs queued ones", async () => {
    const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), "sluice-restart-"));
    const h = scopeHeaders();
    const first = await startServer({}, { dataDir, keepData: true });
    await upload(first, [{ name: "echo.py", content: "def main(p): return p\n" }], { path: "/" });
    const el = (
      await first.services.store.findElements(
        { app: h.app, space: h.space },
        { type: "PY", name: "echo" },
      )
    )[0];
    assert.ok(el);
    const base = {
      scope: { app: h.app, space: h.space },
      elementId: el.id,
      elementType: "PY" as const,
      elementName: "echo",
      folderId: el.folderId,
      version: null,
      triggerType: "ASYNC" as const,
      runName: "echo",
      runParam: '{"again":true}',
      initiator: null,
      parentRunId: null,
      inProcess: false,
      nodeId: null,
      createTime: Date.now(),
    };
    // As a crash would leave them: one task mid-run, one still queued.
    await first.services.store.insertRun({
      ...base,
      id: "crashed-started",
      status: "STARTED",
      startTime: Date.now(),
    });
    await first.services.store.insertRun({ ...base, id: "crashed-queued", status: "QUEUED" });
    await first.close();
    // Closed means closed, the checkpoint worker's connection included: one still closing held an
    // exclusive lock under the second server's first statement ("database is locked").
    const file = path.join(dataDir, "sluice.db");
    if (fs.existsSync("/proc/self/fd")) assert.deepEqual(openFilesUnder(file), []);
    assert.equal(fs.existsSync(`${file}-wal`), false, "the WAL outlived close()");

    const second = await startServer({}, { dataDir });
    try {
      const started = await second.call("GET", "/script/script/lifespan/crashed-started", {
        headers: h,
      });
      assert.equal(started.body.data.success, false);
      assert.match(started.body.data.stderr, /restarted/);
      const queued = await second.call("GET", "/script/script/result/crashed-queued?timeout=5", {
        headers: h,
      });
      assert.deepEqual(queued.body.data, { again: true });
    } finally {
      await second.close();
    }
  });
});
