import assert from "node:assert/strict";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { after, before, describe, it } from "node:test";
import pg from "pg";
import { openStore } from "../../src/store/open-store.ts";
import { startPostgres } from "../helpers/pg.ts";
import { scopeHeaders, startServer, type TestServer, upload } from "../helpers/server.ts";
import { condition, pollUntil } from "../helpers/wait.ts";

/**
 * Ends every other session on the database, as an administrator or a PostgreSQL restart would,
 * and answers once their backends are gone: each has then sent its clients the error and closed
 * their sockets. Answers how many it ended.
 */
async function terminateSessions(url: string): Promise<number> {
  const admin = new pg.Client({ connectionString: url });
  await admin.connect();
  try {
    const r = await admin.query<{ pid: number }>(
      "SELECT pid FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid()",
    );
    const pids = r.rows.map((row) => row.pid);
    await admin.query("SELECT pg_terminate_backend(pid) FROM unnest($1::int[]) AS pid", [pids]);
    await pollUntil(
      async () =>
        (await admin.query("SELECT pid FROM pg_stat_activity WHERE pid = ANY($1)", [pids])).rows,
      (left) => left.length === 0,
      "the ended backends are gone",
    );
    return pids.length;
  } finally {
    await admin.end();
  }
}

describe("PostgreSQL sessions terminated under an idle service (pg_terminate_backend)", () => {
  let dataDir: string;
  before(() => {
    dataDir = fs.mkdtempSync(path.join(os.tmpdir(), "sluice-pg-loss-"));
  });
  after(() => fs.rmSync(dataDir, { recursive: true, force: true }));

  it("the store's pool reports the lost idle connection and the next query reconnects", async () => {
    const url = await (await startPostgres()).createDatabase();
    const warnings: unknown[] = [];
    const warned = condition();
    const store = await openStore({
      databaseUrl: url,
      dataDir,
      logger: {
        warn: (obj) => {
          warnings.push(obj);
          warned.changed();
        },
      },
    });
    try {
      const scope = { app: "a", space: "s" };
      await store.ensureFolder(scope, "/kept", 1); // leaves a connection idle in the pool
      assert.ok((await terminateSessions(url)) >= 1);
      // Without a listener this 'error' event is an uncaught exception that ends the process.
      await warned.until(() => warnings.length > 0, "the pool's error event", 5000);
      assert.equal((await store.folderByPath(scope, "/kept"))?.path, "/kept");
    } finally {
      await store.close();
    }
  });

  it("a cluster-mode service (store, pg-boss, NOTIFY bridge) keeps serving", async () => {
    const url = await (await startPostgres()).createDatabase();
    let server: TestServer | undefined;
    try {
      server = await startServer({ DATABASE_URL: url });
      const up = await upload(
        server,
        [{ name: "echo.py", content: "def main(p):\n    return p\n" }],
        { path: "/" },
      );
      assert.equal(up.body.data[0].status, 0);
      const run = () =>
        server?.call("POST", "/script/external/echo/run-sync", {
          headers: scopeHeaders(),
          body: { n: 1 },
        });
      assert.deepEqual((await run())?.body, { n: 1 });

      assert.ok((await terminateSessions(url)) >= 3);
      assert.deepEqual((await run())?.body, { n: 1 });
      assert.equal((await server.call("GET", "/health")).status, 200);
    } finally {
      await server?.close();
    }
  });
});
