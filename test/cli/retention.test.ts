import assert from "node:assert/strict";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { after, describe, it } from "node:test";
import { retentionCommand } from "../../src/cli/retention.ts";
import { openStore } from "../../src/store/open-store.ts";
import { startPostgres } from "../helpers/pg.ts";
import { newRun } from "../helpers/runs.ts";

/**
 * `sluice retention [--purge]` (docs/retention.md): the operator's view over every scope, read
 * from the configured store; only `--purge` deletes.
 */

const DAY = 86_400_000;

for (const dialect of ["sqlite", "postgres"] as const) {
  describe(`sluice retention (${dialect})`, () => {
    const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), "sluice-retention-cli-"));
    after(() => fs.rmSync(dataDir, { recursive: true, force: true }));

    it("lists every scope's expired runs, deletes nothing, and deletes them with --purge", async () => {
      const databaseUrl =
        dialect === "postgres" ? await (await startPostgres()).createDatabase() : undefined;
      const store = await openStore({ databaseUrl, dataDir });
      const now = Date.now();
      const old: string[] = [];
      for (const space of ["s1", "s2"]) {
        const scope = { app: "a", space };
        const folder = await store.ensureFolder(scope, "/etl", now);
        const { element } = await store.deployFlow({
          scope,
          folderId: folder.id,
          name: `nightly_${space}`,
          revisionName: "r1",
          flow: { vertexes: [], edges: [] },
          configure: space === "s1" ? { retentionDays: 5 } : {},
          description: null,
          user: { userId: "ops" },
          now,
        });
        for (const ago of [40, 10, 1]) {
          const run = newRun({ scope, elementId: element.id, elementType: "DPL", version: "1" });
          await store.insertRun(run, {
            status: "SUCCESS",
            endTime: now - ago * DAY,
            summary: null,
          });
          if (ago > (space === "s1" ? 5 : 30)) old.push(run.id);
        }
      }
      await store.close();
      const env = {
        DATA_DIR: dataDir,
        RUN_RETENTION_DAYS: "30",
        ...(databaseUrl ? { DATABASE_URL: databaseUrl } : {}),
      };

      const dry = await retentionCommand([], env);
      assert.match(dry, /^2\t5 d \(configure\)\tDPL \/etl\/nightly_s1/m, dry);
      assert.match(dry, /^1\t30 d \(global\)\tDPL \/etl\/nightly_s2/m, dry);
      assert.match(dry, /^3 finished runs would be deleted$/m);
      const purge = await retentionCommand(["--purge"], env);
      assert.match(purge, /^deleted 3 runs/m, purge);

      const reopened = await openStore({ databaseUrl, dataDir });
      try {
        for (const id of old) assert.equal(await reopened.getRun(null, id), undefined, id);
        const left = await reopened.db.selectFrom("runs").select("id").execute();
        assert.equal(left.length, 3);
      } finally {
        await reopened.close();
      }
      assert.match(await retentionCommand([], env), /^0 finished runs would be deleted$/m);
    });
  });
}
