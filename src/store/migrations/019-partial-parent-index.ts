import { type Kysely, sql } from "kysely";
import type { Dialect } from "../types.ts";

/**
 * The index of runs by parent (sub-flow runs, found by their parent's ID) keeps only runs that
 * have a parent. Most runs have none, and each of their writes added an entry for NULL: one B-tree
 * write of every run insert, and on PostgreSQL of every write of the row (its status is indexed,
 * so no write of it is an in-place update). `where parent_run_id = ?` implies the index's
 * condition, so both planners still use it (test/store/store-contract.test.ts).
 */
export async function up(db: Kysely<unknown>, _dialect: Dialect): Promise<void> {
  await sql`drop index if exists runs_parent`.execute(db);
  await sql`create index runs_parent on runs (parent_run_id) where parent_run_id is not null`.execute(
    db,
  );
}
