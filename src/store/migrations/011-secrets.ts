import type { Kysely } from "kysely";
import type { Dialect } from "../types.ts";

/**
 * Secrets (docs/secrets.md):
 * - `secrets`: one row per (app, space, name); `value` is the AES-256-GCM text of
 *   src/secrets/crypto.ts, never the plaintext.
 * - `secret_keys`: the key check, one row holding a known text encrypted with the key in force,
 *   so a start with another SECRETS_KEY is refused before any value is read or written.
 */
export async function up(db: Kysely<unknown>, dialect: Dialect): Promise<void> {
  const big = dialect === "postgres" ? "bigint" : "integer";
  await db.schema
    .createTable("secrets")
    .addColumn("app", "text", (c) => c.notNull())
    .addColumn("space", "text", (c) => c.notNull())
    .addColumn("name", "text", (c) => c.notNull())
    .addColumn("value", "text", (c) => c.notNull())
    .addColumn("created_at", big, (c) => c.notNull())
    .addColumn("updated_at", big, (c) => c.notNull())
    .addPrimaryKeyConstraint("secrets_pk", ["app", "space", "name"])
    .execute();
  await db.schema
    .createTable("secret_keys")
    .addColumn("id", "text", (c) => c.primaryKey())
    .addColumn("check_value", "text", (c) => c.notNull())
    .execute();
}
