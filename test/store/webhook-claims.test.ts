import assert from "node:assert/strict";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { after, before, describe, it } from "node:test";
import { createWebhookStore, type WebhookStore } from "../../src/store/kysely-webhooks.ts";
import { type OpenedStore, openStore } from "../../src/store/open-store.ts";
import { startPostgres } from "../helpers/pg.ts";

/** Claims that leave an app's rows for later, and frees chosen ones (docs/webhooks.md, "Fairness"). */

const T0 = 1_700_000_000_000;
const row = (id: string, app: string, now: number) => ({
  id,
  runId: `run-${id}`,
  scope: { app, space: "s" },
  url: "http://127.0.0.1:9/",
  event: "SUCCESS",
  body: "{}",
  now,
});

for (const dialect of ["sqlite", "postgres"] as const) {
  describe(`webhook claims per app (${dialect})`, () => {
    let store: OpenedStore;
    let outbox: WebhookStore;
    let dataDir: string;

    before(async () => {
      dataDir = fs.mkdtempSync(path.join(os.tmpdir(), "sluice-whclaim-"));
      const databaseUrl =
        dialect === "postgres" ? await (await startPostgres()).createDatabase() : undefined;
      store = await openStore({ databaseUrl, dataDir });
      outbox = createWebhookStore(store.db, dialect);
    });
    after(async () => {
      await store?.close();
      fs.rmSync(dataDir, { recursive: true, force: true });
    });

    it("skips the apps named, oldest first among the others; frees only the ids given", async () => {
      // The hog's rows are older than the victim's: without the skip they come first.
      await outbox.addDeliveries([row("h1", "hog", T0), row("h2", "hog", T0 + 1)]);
      await outbox.addDeliveries([row("v1", "victim", T0 + 2), row("w1", "other", T0 + 3)]);
      const now = T0 + 10;
      const got = await outbox.claimDue("n1", now, 1000, 10, ["hog"]);
      assert.deepEqual(got.map((d) => d.id).sort(), ["v1", "w1"]);
      const hog = await outbox.claimDue("n1", now, 1000, 10);
      assert.deepEqual(hog.map((d) => d.id).sort(), ["h1", "h2"]);
      await outbox.releaseClaims("n1", ["h2"]);
      await outbox.releaseClaims("n1", []);
      // Only h2 is free again: the other claims of n1 stand.
      const again = await outbox.claimDue("n2", now, 1000, 10);
      assert.deepEqual(
        again.map((d) => d.id),
        ["h2"],
      );
    });
  });
}
