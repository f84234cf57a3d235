import assert from "node:assert/strict";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { describe, it } from "node:test";
import { DF } from "../helpers/flows.ts";
import { killHard, startProcess } from "../helpers/process.ts";
import { seedFinishedRuns, user1Counts } from "../helpers/seed-runs.ts";
import { OTHER_SCOPE, scopeHeaders } from "../helpers/server.ts";
import { tenantCalls } from "../helpers/tenant-calls.ts";
import { within } from "../helpers/wait.ts";

/**
 * A tenant's monitoring search over a flow of many runs reads every one of them (exact counts,
 * docs/monitoring.md). On SQLite that read ran on the service's own thread: while it lasted, no
 * request of any tenant was answered (docs/security.md, "Monitoring reads"). PostgreSQL's reads
 * always waited on a socket, so this attack is on the embedded store only.
 */
const RUNS = 150_000;

const victim = { ...scopeHeaders(), "content-type": "application/json" };
const attacker = { ...scopeHeaders(OTHER_SCOPE), "content-type": "application/json" };

describe("a tenant's monitoring search against the embedded store", () => {
  it("another tenant's requests are answered while a search over a large flow reads its runs", async () => {
    const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), "sluice-reads-attack-"));
    const server = await startProcess({ DATA_DIR: dataDir });
    const { call, deploy } = tenantCalls(server.url);
    try {
      await deploy(victim, "plain");
      await deploy(attacker, "hot");
      seedFinishedRuns(path.join(dataDir, "sluice.db"), OTHER_SCOPE, "hot", RUNS);
      const search = () =>
        call(attacker, `${DF}/monitor/runs`, {
          pageNo: 0,
          pageSize: 10,
          elementName: "hot",
          quickSearch: "user1",
        });
      // Once on its own: the search is right (exact counts over every match).
      const alone = (await search()).data as { successCount: number; failureCount: number };
      const expected = user1Counts(RUNS);
      assert.equal(alone.failureCount, expected.FAILURE);
      assert.equal(alone.successCount, expected.SUCCESS);

      // Four searches at once, then another tenant's run-sync and /health, one after another.
      const order: string[] = [];
      const searches = Array.from({ length: 4 }, (_, i) =>
        search().then((r) => {
          assert.equal(r.status, true);
          order.push(`search ${i}`);
        }),
      );
      for (let i = 0; i < 3; i++) {
        const r = await within(
          call(victim, `${DF}/run-sync`, { elementName: "plain", parameter: { orders: [] } }),
          30_000,
          "another tenant's run-sync",
        );
        assert.equal(r.status, true, JSON.stringify(r));
        await within(call(victim, "/health"), 30_000, "GET /health");
        order.push(`victim ${i}`);
      }
      await Promise.all(searches);
      // The other tenant was served while the searches read. Without the thread every search
      // came first: the event loop read them one after another before the victim's request. With
      // it, none usually does; on a machine loaded by other tests a search may end first.
      assert.ok(order.indexOf("victim 0") < 4, order.join(", "));
      assert.ok(order.indexOf("victim 2") < order.length - 1, order.join(", "));
    } finally {
      await killHard(server.child);
      fs.rmSync(dataDir, { recursive: true, force: true });
    }
  });
});
