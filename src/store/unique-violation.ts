/**
 * Whether a store write failed on a unique key (PostgreSQL's 23505, SQLite's
 * SQLITE_CONSTRAINT_UNIQUE / PRIMARYKEY): another writer created the same row first. Callers that
 * plan before they write (an import) use it to plan again instead of answering an internal error.
 */
export function isUniqueViolation(err: unknown): boolean {
  if (err instanceof RunIdTaken) return true;
  if (typeof err !== "object" || err === null) return false;
  const e = err as { code?: unknown; errcode?: unknown; message?: unknown };
  if (e.code === "23505") return true;
  if (e.errcode === 2067 || e.errcode === 1555) return true;
  return typeof e.message === "string" && e.message.includes("UNIQUE constraint failed");
}

/**
 * A run's insert found its ID held by another run (run-writes.ts, a write tried again alone), or
 * by a run this process is starting (lifecycle.ts): the unique key's refusal, told by the code
 * that saw it. A run ID derived from its purpose (a custom error handler's,
 * docs/error-handlers.md, "Durable") is made alike by every sender.
 */
export class RunIdTaken extends Error {
  override name = "RunIdTaken";
  constructor(runId: string) {
    super(`run ID ${runId} is taken by another run`);
  }
}
