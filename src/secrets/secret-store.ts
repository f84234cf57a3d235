import type { Kysely } from "kysely";
import type { Database } from "../store/schema.ts";
import type { Scope } from "../store/types.ts";

/** The two tables of migration 011, seen only through this file. */
type SecretTables = {
  secrets: {
    app: string;
    space: string;
    name: string;
    value: string;
    created_at: number;
    updated_at: number;
  };
  secret_keys: { id: string; check_value: string };
};

export interface SecretInfo {
  name: string;
  createTime: number;
  updateTime: number;
}

/** A stored secret as the key rotation reads it: its identity and its encrypted text. */
export interface StoredSecret {
  app: string;
  space: string;
  name: string;
  value: string;
}

/** What the secrets service needs from the database; values are always the encrypted text. */
export interface SecretStore {
  put(scope: Scope, name: string, encrypted: string, now: number): Promise<SecretInfo>;
  list(scope: Scope): Promise<SecretInfo[]>;
  encrypted(scope: Scope, names: readonly string[]): Promise<Map<string, string>>;
  remove(scope: Scope, name: string): Promise<boolean>;
  all(): Promise<StoredSecret[]>;
  /** Replaces a value only if it is still `before` (a concurrent put wins over a rotation). */
  rewrite(row: StoredSecret, before: string): Promise<void>;
  keyCheck(): Promise<string | undefined>;
  /** Writes the check when absent (`before` undefined) or still `before`. */
  setKeyCheck(value: string, before: string | undefined): Promise<void>;
  /** Name and graph JSON of every flow of the scope whose release is approved. */
  liveFlows(scope: Scope): Promise<{ name: string; flow: string }[]>;
}

const CHECK_ID = "check";

export function createSecretStore(base: Kysely<Database>): SecretStore {
  const db = base.withTables<SecretTables>();
  const inScope = (scope: Scope) =>
    db.selectFrom("secrets").where("app", "=", scope.app).where("space", "=", scope.space);
  return {
    async put(scope, name, encrypted, now) {
      const row = await db
        .insertInto("secrets")
        .values({ ...scope, name, value: encrypted, created_at: now, updated_at: now })
        .onConflict((c) =>
          c.columns(["app", "space", "name"]).doUpdateSet({ value: encrypted, updated_at: now }),
        )
        .returning(["name", "created_at", "updated_at"])
        .executeTakeFirstOrThrow();
      return info(row);
    },
    async list(scope) {
      const rows = await inScope(scope)
        .select(["name", "created_at", "updated_at"])
        .orderBy("name")
        .execute();
      return rows.map(info);
    },
    async encrypted(scope, names) {
      if (names.length === 0) return new Map();
      const rows = await inScope(scope)
        .select(["name", "value"])
        .where("name", "in", [...names])
        .execute();
      return new Map(rows.map((r) => [r.name, r.value]));
    },
    async remove(scope, name) {
      const res = await db
        .deleteFrom("secrets")
        .where("app", "=", scope.app)
        .where("space", "=", scope.space)
        .where("name", "=", name)
        .executeTakeFirst();
      return Number(res.numDeletedRows) > 0;
    },
    all: () => db.selectFrom("secrets").select(["app", "space", "name", "value"]).execute(),
    async rewrite(row, before) {
      await db
        .updateTable("secrets")
        .set({ value: row.value })
        .where("app", "=", row.app)
        .where("space", "=", row.space)
        .where("name", "=", row.name)
        .where("value", "=", before)
        .execute();
    },
    async keyCheck() {
      const row = await db
        .selectFrom("secret_keys")
        .select("check_value")
        .where("id", "=", CHECK_ID)
        .executeTakeFirst();
      return row?.check_value;
    },
    async setKeyCheck(value, before) {
      if (before === undefined) {
        await db
          .insertInto("secret_keys")
          .values({ id: CHECK_ID, check_value: value })
          .onConflict((c) => c.column("id").doNothing())
          .execute();
        return;
      }
      await db
        .updateTable("secret_keys")
        .set({ check_value: value })
        .where("id", "=", CHECK_ID)
        .where("check_value", "=", before)
        .execute();
    },
    async liveFlows(scope) {
      return db
        .selectFrom("elements as e")
        .innerJoin("flow_revisions as r", (j) =>
          j.onRef("r.element_id", "=", "e.id").onRef("r.version", "=", "e.release_version"),
        )
        .select(["e.name", "r.flow"])
        .where("e.app", "=", scope.app)
        .where("e.space", "=", scope.space)
        .where("e.type", "=", "DPL")
        .where("e.status", "=", "APPROVED")
        .orderBy("e.name")
        .execute();
    },
  };
}

function info(r: { name: string; created_at: number; updated_at: number }): SecretInfo {
  return { name: r.name, createTime: Number(r.created_at), updateTime: Number(r.updated_at) };
}
