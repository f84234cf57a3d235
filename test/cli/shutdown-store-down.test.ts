import assert from "node:assert/strict";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { after, describe, it } from "node:test";
import pg from "pg";
import { startPostgres } from "../helpers/pg.ts";
import { killHard, startProcess } from "../helpers/process.ts";
import { line } from "../helpers/wait.ts";

describe("sluice serve shut down while its database refuses connections", () => {
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), "sluice-shutdown-db-"));
  after(() => fs.rmSync(dataDir, { recursive: true, force: true }));

  it("logs the failed step, still closes the rest, and exits 1 (not as an uncaught exception)", async () => {
    const url = await (await startPostgres()).createDatabase();
    const proc = await startProcess({
      DATABASE_URL: url,
      DATA_DIR: dataDir,
      SHUTDOWN_GRACE_S: "1",
      SCRIPT_PREFORK: "1",
    });
    try {
      // From another database: PostgreSQL refuses to close the one a session is connected to.
      const db = new URL(url).pathname.slice(1);
      const other = new URL(url);
      other.pathname = "/postgres";
      // The node says when it has noticed: its run-end listener logs the lost connection.
      const stdout = proc.child.stdout;
      assert.ok(stdout);
      const noticed = line(stdout, /lost its connection/, 10_000);
      const admin = new pg.Client({ connectionString: other.toString() });
      await admin.connect();
      try {
        await admin.query(`ALTER DATABASE "${db}" ALLOW_CONNECTIONS false`);
        await admin.query(
          "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = $1 AND pid <> pg_backend_pid()",
          [db],
        );
      } finally {
        await admin.end();
      }
      await noticed;

      proc.child.kill("SIGTERM");
      const code = await new Promise<number | null>((resolve) =>
        proc.child.once("exit", (c) => resolve(c)),
      );
      const lines = proc
        .output()
        .split("\n")
        .flatMap((l) => {
          try {
            return [JSON.parse(l) as { level: number; msg: string }];
          } catch {
            return [];
          }
        });
      const msgs = lines.map((l) => l.msg);
      assert.ok(!msgs.includes("uncaught exception: exiting"), msgs.join("\n"));
      assert.ok(msgs.includes("shutdown: ending this node's runs failed"), msgs.join("\n"));
      // The steps after it ran: closing the services (runner, store) did not fail.
      assert.ok(!msgs.includes("shutdown: closing the services failed"), msgs.join("\n"));
      assert.equal(code, 1);
    } finally {
      await killHard(proc.child);
    }
  });
});
