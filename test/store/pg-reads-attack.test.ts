import assert from "node:assert/strict";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { after, describe, it } from "node:test";
import { DF } from "../helpers/flows.ts";
import { startPostgres } from "../helpers/pg.ts";
import { killHard, startProcess } from "../helpers/process.ts";
import { seedFinishedRunsPg, user1Counts } from "../helpers/seed-runs.ts";
import { OTHER_SCOPE, scopeHeaders } from "../helpers/server.ts";
import { tenantCalls } from "../helpers/tenant-calls.ts";
import { within } from "../helpers/wait.ts";

/**
 * A tenant's monitoring searches over a flow of many runs on PostgreSQL: each reads every match
 * for its exact counts (docs/monitoring.md) and holds a connection while it does. They took the
 * connections every other statement of the node needs (docs/security.md, "Monitoring reads").
 */
const RUNS = 150_000;
const SEARCHES = 30;

const victim = { ...scopeHeaders(), "content-type": "application/json" };
const attacker = { ...scopeHeaders(OTHER_SCOPE), "content-type": "application/json" };

describe("a tenant's monitoring searches against the PostgreSQL store", () => {
  const dirs: string[] = [];
  after(() => {
    for (const d of dirs) fs.rmSync(d, { recursive: true, force: true });
  });

  it("another tenant's run-sync is answered while many searches over a large flow read", async () => {
    const databaseUrl = await (await startPostgres()).createDatabase();
    const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), "sluice-pg-reads-attack-"));
    dirs.push(dataDir);
    const server = await startProcess({ DATA_DIR: dataDir, DATABASE_URL: databaseUrl });
    const { call, deploy } = tenantCalls(server.url);
    try {
      await deploy(victim, "plain");
      await deploy(attacker, "hot");
      await seedFinishedRunsPg(databaseUrl, OTHER_SCOPE, "hot", RUNS);
      const search = () =>
        call(attacker, `${DF}/monitor/runs`, {
          pageNo: 0,
          pageSize: 10,
          elementName: "hot",
          quickSearch: "user1",
        });
      const alone = (await search()).data as { successCount: number; failureCount: number };
      const expected = user1Counts(RUNS);
      assert.equal(alone.failureCount, expected.FAILURE);
      assert.equal(alone.successCount, expected.SUCCESS);
      // Warm: the victim's flow and statements, so that its run-sync measures the wait alone.
      await call(victim, `${DF}/run-sync`, { elementName: "plain", parameter: { orders: [] } });

      const order: string[] = [];
      const searches = Array.from({ length: SEARCHES }, (_, i) =>
        search().then((r) => {
          assert.equal(r.status, true, JSON.stringify(r));
          order.push(`search ${i}`);
        }),
      );
      for (let i = 0; i < 3; i++) {
        const r = await within(
          call(victim, `${DF}/run-sync`, { elementName: "plain", parameter: { orders: [] } }),
          60_000,
          "another tenant's run-sync",
        );
        assert.equal(r.status, true, JSON.stringify(r));
        order.push(`victim ${i}`);
      }
      await Promise.all(searches);
      // Without a pool of their own, the victim waited for a connection behind twenty searches
      // or more (29 in one try); with it, a few at most end before it is answered, however busy
      // the machine running the test.
      assert.ok(order.indexOf("victim 2") < 10, order.join(", "));
    } finally {
      await killHard(server.child);
    }
  });
});
