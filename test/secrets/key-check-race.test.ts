import assert from "node:assert/strict";
import { randomBytes } from "node:crypto";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { describe, it } from "node:test";
import pino from "pino";
import { systemClock } from "../../src/clock.ts";
import { createSecretStore, type SecretStore } from "../../src/secrets/secret-store.ts";
import { createSecrets } from "../../src/secrets/secrets.ts";
import { openStore } from "../../src/store/open-store.ts";

/**
 * docs/secrets.md, "Key check": two processes of a cluster starting together on an empty
 * installation with different keys. Both read no check; one writes its own, and the other must
 * not go on with a key that does not open it.
 */
const start = (store: SecretStore, key: Buffer) =>
  createSecrets({
    config: { secrets: { key, previousKey: undefined } },
    store,
    clock: systemClock,
    logger: pino({ level: "silent" }),
  });

describe("key check at a first start racing another process", () => {
  it("refuses the key of the process whose check lost the race", async () => {
    const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), "sluice-keyrace-"));
    const opened = await openStore({ dataDir });
    try {
      const store = createSecretStore(opened.db);
      await start(store, randomBytes(32)); // the winner wrote its check first
      let first = true;
      // The loser read the (then empty) check before the winner wrote it.
      const late: SecretStore = {
        ...store,
        keyCheck: async () => {
          if (first) {
            first = false;
            return undefined;
          }
          return store.keyCheck();
        },
      };
      await assert.rejects(start(late, randomBytes(32)), /SECRETS_KEY does not match/);
    } finally {
      await opened.close();
      fs.rmSync(dataDir, { recursive: true, force: true });
    }
  });
});
