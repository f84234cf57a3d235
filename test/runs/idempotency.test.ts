import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { systemClock } from "../../src/clock.ts";
import { createIdempotency } from "../../src/runs/idempotency.ts";
import type { IdempotencyKeys, KeyRecord } from "../../src/store/idempotency-keys.ts";
import type { Run } from "../../src/store/types.ts";

const call = {
  scope: { app: "a", space: "s" },
  endpoint: "POST /run-sync",
  key: "k1",
  fingerprint: "f",
};

describe("idempotency: a retry while the first call finishes", () => {
  it("a key committed between the retry's two reads answers the run, not 'deleted'", async () => {
    const held: KeyRecord = {
      fingerprint: "f",
      runId: "r1",
      createdAt: Date.now(),
      expiresAt: Date.now() + 60_000,
      committed: false,
      ageMs: 0,
    };
    let runRecorded = false;
    const keys: IdempotencyKeys = {
      claim: async () => ({ won: false, held }),
      // The first call records its run and commits its key just as the retry reads the key.
      get: async () => {
        runRecorded = true;
        return { ...held, committed: true };
      },
      commit: async () => {},
      release: async () => false,
      prune: async () => 0,
    };
    const run = { id: "r1", status: "SUCCESS" } as Run;
    const idem = createIdempotency({
      keys,
      store: { getRun: async () => (runRecorded ? run : undefined) },
      clock: systemClock,
      logger: { warn() {} },
      config: { windowS: 60 },
    });
    const settled = await idem.once(call, async () => assert.fail("a second run was started"));
    assert.deepEqual(settled, { first: false, runId: "r1", run });
  });
});
