import assert from "node:assert/strict";
import { randomBytes } from "node:crypto";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { after, before, describe, it } from "node:test";
import pino from "pino";
import { systemClock } from "../../src/clock.ts";
import { encryptValue, tryDecrypt } from "../../src/secrets/crypto.ts";
import { createSecretStore, type SecretStore } from "../../src/secrets/secret-store.ts";
import { createSecrets } from "../../src/secrets/secrets.ts";
import { type OpenedStore, openStore } from "../../src/store/open-store.ts";
import { startPostgres } from "../helpers/pg.ts";

const SCOPE = { app: "app1", space: "space1" };
const OTHER = { app: "app1", space: "space2" };
const A = randomBytes(32);
const B = randomBytes(32);
const C = randomBytes(32);
const logger = pino({ level: "silent" });
const aad = (name: string, scope = SCOPE) =>
  `secret\u0000${scope.app}\u0000${scope.space}\u0000${name}`;

const start = (store: SecretStore, key: Buffer | undefined, previousKey?: Buffer) =>
  createSecrets({ config: { secrets: { key, previousKey } }, store, clock: systemClock, logger });

for (const dialect of ["sqlite", "postgres"] as const) {
  describe(`secrets service (${dialect})`, () => {
    let opened: OpenedStore;
    let store: SecretStore;
    let dataDir: string;

    before(async () => {
      dataDir = fs.mkdtempSync(path.join(os.tmpdir(), "sluice-secrets-"));
      const databaseUrl =
        dialect === "postgres" ? await (await startPostgres()).createDatabase() : undefined;
      opened = await openStore({ databaseUrl, dataDir });
      store = createSecretStore(opened.db);
    });

    after(async () => {
      await opened?.close();
      fs.rmSync(dataDir, { recursive: true, force: true });
    });

    it("stores values encrypted, scoped, listed by name only", async () => {
      const s = await start(store, A);
      const info = await s.put(SCOPE, "TOKEN", "tok-value-1");
      assert.equal(info.name, "TOKEN");
      await s.put(SCOPE, "TOKEN", "tok-value-2");
      await s.put(OTHER, "ELSEWHERE", "other-value");
      const listed = await s.list(SCOPE);
      assert.deepEqual(
        listed.map((x) => x.name),
        ["TOKEN"],
      );
      assert.ok(!JSON.stringify(listed).includes("tok-value"));
      const raw = (await store.all()).find((r) => r.name === "TOKEN");
      assert.ok(raw && !raw.value.includes("tok-value"));
      assert.equal(tryDecrypt(A, raw.value, aad("TOKEN")), "tok-value-2");
      const r = s.resolver(SCOPE);
      assert.equal((await r.values(["TOKEN"])).get("TOKEN"), "tok-value-2");
      assert.deepEqual(r.handedOut(), ["tok-value-2"]);
      await assert.rejects(s.resolver(SCOPE).values(["ELSEWHERE"]), /ELSEWHERE does not exist/);
      assert.equal(await s.exists(OTHER, "TOKEN"), false);
    });

    it("refuses a start with another key, naming SECRETS_KEY and never a key", async () => {
      await assert.rejects(start(store, B), (err: Error) => {
        assert.match(err.message, /SECRETS_KEY does not match/);
        for (const k of [A, B])
          for (const enc of ["hex", "base64"] as const)
            assert.ok(!err.message.includes(k.toString(enc)));
        return true;
      });
    });

    it("without SECRETS_KEY starts, and every secret operation answers a clear error", async () => {
      const s = await start(store, undefined);
      await assert.rejects(s.list(SCOPE), (e: Error) => e.message.includes("SECRETS_KEY"));
      await assert.rejects(s.put(SCOPE, "X", "y"), (e: Error) => e.message.includes("SECRETS_KEY"));
      await assert.rejects(s.resolver(SCOPE).values(["TOKEN"]), /SECRETS_KEY is not set/);
    });

    it("rotates: the previous key opens, every value is re-encrypted with the new one", async () => {
      const s = await start(store, B, A);
      const rows = await store.all();
      assert.ok(rows.length >= 2);
      for (const row of rows) {
        assert.equal(tryDecrypt(A, row.value, aad(row.name, row)), undefined, row.name);
        assert.notEqual(tryDecrypt(B, row.value, aad(row.name, row)), undefined, row.name);
      }
      assert.equal((await s.resolver(SCOPE).values(["TOKEN"])).get("TOKEN"), "tok-value-2");
      // The new key alone now starts; the old key alone is refused.
      const only = await start(store, B);
      assert.equal((await only.resolver(SCOPE).values(["TOKEN"])).get("TOKEN"), "tok-value-2");
      await assert.rejects(start(store, A), /SECRETS_KEY does not match/);
    });

    it("re-encrypts on use a value an older process wrote with the previous key", async () => {
      // A process started before the rotation, still on key B, writes after this one rotated to C.
      const rotated = await start(store, C, B);
      await assert.rejects(start(store, B), /SECRETS_KEY does not match/);
      const [row] = (await store.all()).filter((r) => r.name === "TOKEN");
      assert.ok(row);
      await store.rewrite(
        { ...row, value: encryptValue(B, "late-write", aad("TOKEN")) },
        row.value,
      );
      assert.equal((await rotated.resolver(SCOPE).values(["TOKEN"])).get("TOKEN"), "late-write");
      const after = (await store.all()).find((r) => r.name === "TOKEN");
      assert.equal(after && tryDecrypt(C, after.value, aad("TOKEN")), "late-write");
    });

    it("deletes, and answers an unknown name as not found", async () => {
      const s = await start(store, C);
      await s.remove(SCOPE, "TOKEN");
      await assert.rejects(s.remove(SCOPE, "TOKEN"), /secret does not exist: TOKEN/);
      await assert.rejects(s.remove(SCOPE, "ELSEWHERE"), /secret does not exist: ELSEWHERE/);
    });
  });
}
