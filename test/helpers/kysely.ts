import {
  type Driver,
  DummyDriver,
  Kysely,
  PostgresAdapter,
  PostgresIntrospector,
  PostgresQueryCompiler,
  SqliteAdapter,
  SqliteIntrospector,
  SqliteQueryCompiler,
} from "kysely";
import type { Database } from "../../src/store/schema.ts";

/**
 * A Kysely of one of the store's two dialects over `driver`; by default one that runs nothing,
 * for tests of the SQL a query compiles to.
 */
export function kyselyOf(
  dialect: "sqlite" | "postgres",
  driver: Driver = new DummyDriver(),
): Kysely<Database> {
  const pg = dialect === "postgres";
  return new Kysely<Database>({
    dialect: {
      createAdapter: () => (pg ? new PostgresAdapter() : new SqliteAdapter()),
      createDriver: () => driver,
      createIntrospector: (db) => (pg ? new PostgresIntrospector(db) : new SqliteIntrospector(db)),
      createQueryCompiler: () => (pg ? new PostgresQueryCompiler() : new SqliteQueryCompiler()),
    },
  });
}
