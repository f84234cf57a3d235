import { type Kysely, sql } from "kysely";
import { databaseLater, databaseNow } from "./node-liveness.ts";
import type { Database } from "./schema.ts";
import type { Dialect, Scope } from "./types.ts";

/** Where a key lives: the caller's scope and the endpoint it was sent to (docs/idempotency.md). */
export interface KeyPlace {
  scope: Scope;
  endpoint: string;
  key: string;
}

/** What a key holds: the request it was first used with and the run that request started. */
export interface KeyRecord {
  fingerprint: string;
  runId: string;
  /** When the key was claimed, by the database's clock (node-liveness.ts). */
  createdAt: number;
  expiresAt: number;
  /** The run was recorded (a row without its run is then a deleted run). */
  committed: boolean;
  /** How long ago the key was claimed, by the database's clock: a takeover's measure. */
  ageMs: number;
}

/**
 * The store of `Idempotency-Key`s: a narrow interface of its own beside the Store, over the shared
 * database, so every API node of a cluster sees the same keys. Its primary key decides between
 * concurrent first calls.
 */
export interface IdempotencyKeys {
  /**
   * Inserts `rec` for the key unless a live (unexpired) row holds it; an expired row is replaced
   * in the same statement. Its time and its window's end are the database's clock's; where the
   * database has none (SQLite) `rec.createdAt` and `rec.expiresAt`, else they only give the
   * window's length. `won`: this call's row landed. `held`: the row that holds the key now
   * (undefined when it went away between the insert and the read).
   */
  claim(
    at: KeyPlace,
    rec: Omit<KeyRecord, "committed" | "ageMs">,
  ): Promise<{ won: boolean; held: KeyRecord | undefined }>;
  /** The key's row; `now` is the caller's clock, used only where the database has none (SQLite). */
  get(at: KeyPlace, now: number): Promise<KeyRecord | undefined>;
  /** Marks the key's run as recorded, if the key still names `runId`. */
  commit(at: KeyPlace, runId: string): Promise<void>;
  /** Frees the key if it still names `runId` and that run was never recorded. True: freed. */
  release(at: KeyPlace, runId: string): Promise<boolean>;
  /** Deletes every key whose window ended (by the database's clock; `now` in SQLite); how many. */
  prune(now: number): Promise<number>;
}

export function createIdempotencyKeys(db: Kysely<Database>, dialect: Dialect): IdempotencyKeys {
  const where = (at: KeyPlace) =>
    db
      .selectFrom("idempotency_keys")
      .where("app", "=", at.scope.app)
      .where("space", "=", at.scope.space)
      .where("endpoint", "=", at.endpoint)
      .where("idem_key", "=", at.key);
  return {
    async claim(at, rec) {
      const row = {
        app: at.scope.app,
        space: at.scope.space,
        endpoint: at.endpoint,
        idem_key: at.key,
        fingerprint: rec.fingerprint,
        run_id: rec.runId,
        // Claimed at, and its window, by the database's clock: nodes' clocks may disagree by
        // minutes, and a claim that looked old (or expired) to another node was taken over
        // while it was being used.
        created_at: databaseNow(dialect, rec.createdAt),
        expires_at: databaseLater(dialect, rec.createdAt, rec.expiresAt - rec.createdAt),
        committed: 0,
      };
      const landed = await db
        .insertInto("idempotency_keys")
        .values(row)
        .onConflict((oc) =>
          oc
            .columns(["app", "space", "endpoint", "idem_key"])
            .doUpdateSet({
              fingerprint: row.fingerprint,
              run_id: row.run_id,
              created_at: row.created_at,
              expires_at: row.expires_at,
              committed: 0,
            })
            .where("idempotency_keys.expires_at", "<=", databaseNow(dialect, rec.createdAt)),
        )
        .returning("run_id")
        .executeTakeFirst();
      if (landed?.run_id === rec.runId)
        return { won: true, held: { ...rec, committed: false, ageMs: 0 } };
      return { won: false, held: await this.get(at, rec.createdAt) };
    },

    async get(at, now) {
      const r = await where(at)
        .select(["fingerprint", "run_id", "created_at", "expires_at", "committed"])
        .select(sql<number>`${databaseNow(dialect, now)} - created_at`.as("age_ms"))
        .executeTakeFirst();
      if (!r) return undefined;
      return {
        fingerprint: r.fingerprint,
        runId: r.run_id,
        createdAt: Number(r.created_at),
        expiresAt: Number(r.expires_at),
        committed: Number(r.committed) === 1,
        ageMs: Number(r.age_ms),
      };
    },

    async commit(at, runId) {
      await db
        .updateTable("idempotency_keys")
        .set({ committed: 1 })
        .where("app", "=", at.scope.app)
        .where("space", "=", at.scope.space)
        .where("endpoint", "=", at.endpoint)
        .where("idem_key", "=", at.key)
        .where("run_id", "=", runId)
        .execute();
    },

    async release(at, runId) {
      const r = await db
        .deleteFrom("idempotency_keys")
        .where("app", "=", at.scope.app)
        .where("space", "=", at.scope.space)
        .where("endpoint", "=", at.endpoint)
        .where("idem_key", "=", at.key)
        .where("run_id", "=", runId)
        .where("committed", "=", 0)
        .executeTakeFirst();
      return Number(r.numDeletedRows) > 0;
    },

    async prune(now) {
      const r = await db
        .deleteFrom("idempotency_keys")
        .where("expires_at", "<=", databaseNow(dialect, now))
        .executeTakeFirst();
      return Number(r.numDeletedRows);
    },
  };
}
