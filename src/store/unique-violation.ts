/**
 * Whether a store write failed on a unique key (PostgreSQL's 23505, SQLite's
 * SQLITE_CONSTRAINT_UNIQUE / PRIMARYKEY): another writer created the same row first. Callers that
 * plan before they write (an import) use it to plan again instead of answering an internal error.
 */
export function isUniqueViolation(err: unknown): boolean {
  if (typeof err !== "object" || err === null) return false;
  const e = err as { code?: unknown; errcode?: unknown; message?: unknown };
  if (e.code === "23505") return true;
  if (e.errcode === 2067 || e.errcode === 1555) return true;
  return typeof e.message === "string" && e.message.includes("UNIQUE constraint failed");
}
