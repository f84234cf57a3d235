import assert from "node:assert/strict";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { after, before, describe, it } from "node:test";
import pino from "pino";
import { systemClock } from "../../src/clock.ts";
import {
  CLAIM_TAKEOVER_MS,
  canonicalJson,
  createIdempotency,
  fingerprint,
} from "../../src/runs/idempotency.ts";
import { createIdempotencyKeys, type IdempotencyKeys } from "../../src/store/idempotency-keys.ts";
import { type OpenedStore, openStore } from "../../src/store/open-store.ts";
import type { Scope } from "../../src/store/types.ts";
import { startPostgres } from "../helpers/pg.ts";
import { newRun } from "../helpers/runs.ts";
import { gate } from "../helpers/wait.ts";

/** The key store and the claim rules over both dialects (docs/idempotency.md). */

const SCOPE: Scope = { app: "app1", space: "space1" };
const OTHER: Scope = { app: "app1", space: "space2" };
const T0 = 1_700_000_000_000;
let seq = 0;
const place = (scope: Scope = SCOPE) => ({ scope, endpoint: "POST /run", key: `k${++seq}` });
const rec = (runId: string, at = T0) => ({
  fingerprint: "f1",
  runId,
  createdAt: at,
  expiresAt: at + 1000,
});

describe("canonical request fingerprints", () => {
  it("ignore key order and absent fields, and tell values apart", () => {
    assert.equal(
      canonicalJson({ b: 1, a: [{ y: 2, x: null }], u: undefined }),
      '{"a":[{"x":null,"y":2}],"b":1}',
    );
    assert.equal(
      fingerprint({ a: 1, b: { c: 2, d: 3 } }),
      fingerprint({ b: { d: 3, c: 2 }, a: 1 }),
    );
    assert.notEqual(fingerprint({ a: 1 }), fingerprint({ a: "1" }));
    assert.notEqual(fingerprint({ a: [1, 2] }), fingerprint({ a: [2, 1] }));
    assert.match(fingerprint({}), /^[0-9a-f]{64}$/);
  });
});

for (const dialect of ["sqlite", "postgres"] as const) {
  describe(`idempotency keys (${dialect})`, () => {
    let store: OpenedStore;
    let keys: IdempotencyKeys;
    let dataDir: string;

    before(async () => {
      dataDir = fs.mkdtempSync(path.join(os.tmpdir(), "sluice-idem-"));
      const databaseUrl =
        dialect === "postgres" ? await (await startPostgres()).createDatabase() : undefined;
      store = await openStore({ databaseUrl, dataDir });
      keys = createIdempotencyKeys(store.db, dialect);
    });

    after(async () => {
      await store?.close();
      fs.rmSync(dataDir, { recursive: true, force: true });
    });

    it("the first claim wins; a second one reads the winner's run; another scope is independent", async () => {
      const at = place();
      assert.deepEqual(await keys.claim(at, rec("r1")), {
        won: true,
        held: { ...rec("r1"), committed: false, ageMs: 0 },
      });
      const again = await keys.claim(at, { ...rec("r2"), fingerprint: "f2" });
      assert.equal(again.won, false);
      assert.equal(again.held?.runId, "r1");
      assert.equal(again.held?.fingerprint, "f1");
      assert.equal((await keys.claim({ ...at, scope: OTHER }, rec("r3"))).won, true);
      assert.equal((await keys.claim({ ...at, endpoint: "POST /run-sync" }, rec("r4"))).won, true);
    });

    it("concurrent claims of one key: exactly one lands", async () => {
      const at = place();
      const results = await Promise.all(
        Array.from({ length: 8 }, (_, i) => keys.claim(at, rec(`c${i}`))),
      );
      const winners = results.filter((r) => r.won);
      assert.equal(winners.length, 1);
      const winner = winners[0]?.held?.runId;
      for (const r of results) assert.equal(r.held?.runId, winner);
    });

    /** Ends the key's window `ms` earlier, by whichever clock the store counts windows with. */
    const age = (at: { key: string }, ms: number) =>
      store.db
        .updateTable("idempotency_keys")
        .set((eb) => ({ expires_at: eb("expires_at", "-", ms) }))
        .where("idem_key", "=", at.key)
        .execute();

    it("an expired key is claimed again in the same statement; prune deletes only expired keys", async () => {
      const old = place();
      const live = place();
      const now = Date.now();
      await keys.claim(old, rec("e1", now));
      await keys.claim(live, { ...rec("e2", now), expiresAt: now + 60_000 });
      // Not yet expired: still held.
      assert.equal((await keys.claim(old, rec("e3", Date.now()))).won, false);
      await age(old, 2000);
      const taken = await keys.claim(old, rec("e4", Date.now()));
      assert.equal(taken.won, true);
      assert.equal((await keys.get(old, Date.now()))?.runId, "e4");
      await age(old, 2000);
      assert.ok((await keys.prune(Date.now())) >= 1);
      assert.equal(await keys.get(old, Date.now()), undefined);
      assert.equal((await keys.get(live, Date.now()))?.runId, "e2");
    });

    if (dialect === "postgres")
      it("a key's window is counted by the database's clock: a node whose clock is ahead neither takes over nor prunes a fresh claim", async () => {
        const at = place();
        const now = Date.now();
        await keys.claim(at, { ...rec("b1", now), expiresAt: now + 60_000 });
        // Another API node, five minutes ahead, claims the key and prunes by its own clock.
        const ahead = now + 5 * 60_000;
        const second = await keys.claim(at, { ...rec("a1", ahead), expiresAt: ahead + 60_000 });
        assert.equal(second.won, false);
        assert.equal(second.held?.runId, "b1");
        await keys.prune(ahead);
        assert.equal((await keys.get(at, ahead))?.runId, "b1");
      });

    it("release frees only an uncommitted key that still names the run", async () => {
      const at = place();
      await keys.claim(at, rec("x1"));
      assert.equal(await keys.release(at, "other"), false);
      await keys.commit(at, "x1");
      assert.equal((await keys.get(at, T0))?.committed, true);
      assert.equal(await keys.release(at, "x1"), false);
      const at2 = place();
      await keys.claim(at2, rec("x2"));
      assert.equal(await keys.release(at2, "x2"), true);
      assert.equal(await keys.get(at2, T0), undefined);
    });

    describe("once()", () => {
      const logger = pino({ level: "silent" });
      const idem = () =>
        createIdempotency({
          keys,
          store,
          clock: systemClock,
          logger,
          config: { windowS: 60 },
        });
      const call = (key: string, fp = "same") => ({ ...place(), key, fingerprint: fp });

      it("a retry while the first call is still creating its run waits for it and starts nothing", async () => {
        const i = idem();
        const c = call(`w${++seq}`);
        const inStart = gate();
        const finish = gate();
        let starts = 0;
        const first = i.once(c, async (runId) => {
          starts++;
          inStart.open();
          await finish.promise;
          await store.insertRun(newRun({ id: runId, scope: SCOPE }));
          return runId;
        });
        await inStart.promise;
        const second = i.once(c, async (runId) => {
          starts++;
          return runId;
        });
        finish.open();
        const [a, b] = await Promise.all([first, second]);
        assert.equal(a.first, true);
        assert.equal(b.first, false);
        assert.equal(starts, 1);
        assert.equal(a.first && b.first === false && a.value === b.runId, true);
      });

      it("a claim left without its run past the takeover time is taken over; a committed one whose run was deleted answers no run", async () => {
        const i = idem();
        const dead = call(`t${++seq}`);
        const long = Date.now() - CLAIM_TAKEOVER_MS - 1;
        await keys.claim(dead, {
          ...rec("never", long),
          fingerprint: "same",
          expiresAt: long + 60_000,
        });
        // Claimed that long ago by the database's clock too (PostgreSQL writes its own).
        await store.db
          .updateTable("idempotency_keys")
          .set((eb) => ({ created_at: eb("created_at", "-", CLAIM_TAKEOVER_MS + 1) }))
          .where("idem_key", "=", dead.key)
          .execute();
        const taken = await i.once(dead, async (runId) => {
          await store.insertRun(newRun({ id: runId, scope: SCOPE }));
          return runId;
        });
        assert.equal(taken.first, true);
        const deleted = call(`g${++seq}`);
        await keys.claim(deleted, {
          ...rec("gone", Date.now()),
          fingerprint: "same",
          expiresAt: Date.now() + 60_000,
        });
        await keys.commit(deleted, "gone");
        assert.deepEqual(await i.once(deleted, async (id) => id), {
          first: false,
          runId: "gone",
          run: undefined,
        });
      });

      it("a different request under the key is a 400 naming the header; a failed start frees the key", async () => {
        const i = idem();
        const c = call(`d${++seq}`);
        await assert.rejects(
          i.once(c, async () => {
            throw new Error("refused");
          }),
          /refused/,
        );
        const ok = await i.once(c, async (runId) => {
          await store.insertRun(newRun({ id: runId, scope: SCOPE }));
          return runId;
        });
        assert.equal(ok.first, true);
        await assert.rejects(
          i.once({ ...c, fingerprint: "another" }, async (id) => id),
          (err: { code?: number; message: string }) =>
            err.code === 400 && err.message.includes("Idempotency-Key"),
        );
      });
    });
  });
}
