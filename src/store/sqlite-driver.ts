import { DatabaseSync, type SQLInputValue, type StatementSync } from "node:sqlite";
import type { SqliteDatabase, SqliteStatement } from "kysely";
import { startCheckpointer } from "./sqlite-checkpointer.ts";

/**
 * Adapts `node:sqlite` (built into Node, so no native addon) to the subset of better-sqlite3's
 * Database that Kysely's SqliteDialect needs. Statements are cached by SQL text because Kysely
 * compiles the same few hot queries over and over.
 */
export function openSqlite(file: string): { db: SqliteDatabase; raw: DatabaseSync } {
  const raw = new DatabaseSync(file);
  // WAL + NORMAL: a commit survives a process crash (not a power cut) at a few µs per commit.
  raw.exec("PRAGMA journal_mode = WAL; PRAGMA synchronous = NORMAL; PRAGMA foreign_keys = ON;");
  raw.exec("PRAGMA busy_timeout = 5000;");
  // Monitoring reads scattered run rows (text filters scan one flow's runs): a 64 MiB page cache
  // and memory-mapped reads keep a million-run database's hot part out of read() calls.
  raw.exec(
    "PRAGMA cache_size = -65536; PRAGMA mmap_size = 1073741824; PRAGMA temp_store = MEMORY;",
  );
  const checkpointer = startCheckpointer(raw, file);
  const cache = new Map<string, SqliteStatement>();

  const db: SqliteDatabase = {
    close: () => {
      checkpointer.stop();
      raw.close();
    },
    prepare(sql: string): SqliteStatement {
      let stmt = cache.get(sql);
      if (!stmt) {
        stmt = wrap(raw.prepare(sql));
        if (cache.size > 500) cache.clear();
        cache.set(sql, stmt);
      }
      return stmt;
    },
  };
  return { db, raw };
}

function toParam(value: unknown): SQLInputValue {
  if (typeof value === "boolean") return value ? 1 : 0;
  if (value === undefined) return null;
  return value as SQLInputValue;
}

function wrap(stmt: StatementSync): SqliteStatement {
  const reader = stmt.columns().length > 0;
  return {
    reader,
    all: (params) => stmt.all(...params.map(toParam)),
    run: (params) => {
      const r = stmt.run(...params.map(toParam));
      return { changes: r.changes, lastInsertRowid: r.lastInsertRowid };
    },
    iterate: (params) => stmt.iterate(...params.map(toParam)) as IterableIterator<unknown>,
  };
}
