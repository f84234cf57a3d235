import assert from "node:assert/strict";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { after, before, describe, it } from "node:test";
import pg from "pg";
import { ErrorCode, SluiceError } from "../../src/errors.ts";
import { parseRunsFilter } from "../../src/monitor/filter.ts";
import { type OpenedStore, openStore } from "../../src/store/open-store.ts";
import { startPostgres } from "../helpers/pg.ts";
import { pollUntil } from "../helpers/wait.ts";

/**
 * PostgreSQL's monitoring reads on their own connections (docs/security.md, "Monitoring reads"):
 * a read past MONITOR_READ_TIMEOUT_MS is cancelled and answered 429, and reads waiting for a
 * connection take turns between apps. A lock on the runs table held by the test keeps reads
 * waiting for exactly as long as it wants, with no sleep.
 */
const query = parseRunsFilter({ pageNo: 0, pageSize: 10 });
const A = { app: "app-a", space: "s" };
const B = { app: "app-b", space: "s" };

async function openWith(url: string, timeoutMs: number): Promise<OpenedStore> {
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), "sluice-pg-reads-"));
  return openStore({ databaseUrl: url, dataDir, monitorReads: { connections: 1, timeoutMs } });
}

describe("PostgreSQL monitoring reads (own pool, time limit, turns)", () => {
  let url: string;
  const locker = () => new pg.Client({ connectionString: url });
  before(async () => {
    url = await (await startPostgres()).createDatabase();
  });

  it("a read longer than the time limit is cancelled with a 429 naming the setting", async () => {
    const store = await openWith(url, 300);
    after(() => store.close());
    const lock = locker();
    await lock.connect();
    try {
      await lock.query("begin; lock table runs in access exclusive mode");
      const err = await store.monitorRuns(A, "1", query).then(
        () => assert.fail("the read waited past its limit"),
        (e: unknown) => e,
      );
      assert.ok(err instanceof SluiceError, String(err));
      assert.equal(err.code, ErrorCode.TOO_MANY);
      assert.match(err.message, /longer than 300 ms \(MONITOR_READ_TIMEOUT_MS\)/);
      await lock.query("rollback");
      // The pool goes on: the next read answers.
      assert.equal((await store.monitorRuns(A, "1", query)).totalCount, 0);
    } finally {
      await lock.end();
    }
  });

  it("reads waiting for the connection take turns between apps", async () => {
    const store = await openWith(url, 30_000);
    after(() => store.close());
    const lock = locker();
    await lock.connect();
    try {
      await lock.query("begin; lock table runs in access exclusive mode");
      const order: string[] = [];
      const read = (scope: typeof A, label: string) =>
        store.monitorRuns(scope, "1", query).then(() => order.push(label));
      // A's first read takes the one connection (and waits on the lock); then A queues two
      // more before B asks once.
      const reads = [read(A, "a1"), read(A, "a2"), read(A, "a3"), read(B, "b1")];
      // Released once a1 waits on the lock, so that it runs first by the pool's choice alone.
      await pollUntil(
        async () =>
          (
            await lock.query<{ n: number }>(
              "select count(*)::int as n from pg_locks where relation = 'runs'::regclass and not granted",
            )
          ).rows[0]?.n ?? 0,
        (n) => n > 0,
        "the first read waits on the lock",
      );
      await lock.query("rollback");
      await Promise.all(reads);
      assert.deepEqual(order, ["a1", "b1", "a2", "a3"]);
    } finally {
      await lock.end();
    }
  });
});
