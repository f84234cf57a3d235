import { DatabaseSync, type SQLInputValue, type StatementSync } from "node:sqlite";
import {
  type DialectAdapter,
  SqliteAdapter,
  type SqliteDatabase,
  SqliteDialect,
  type SqliteStatement,
} from "kysely";
import { LRUCache } from "lru-cache";
import { startCheckpointer } from "./sqlite-checkpointer.ts";

/**
 * Adapts `node:sqlite` (built into Node, so no native addon) to the subset of better-sqlite3's
 * Database that Kysely's SqliteDialect needs. Statements are cached by SQL text because Kysely
 * compiles the same few hot queries over and over.
 */
export function openSqlite(file: string): {
  db: SqliteDatabase;
  raw: DatabaseSync;
  /** Closes this connection and the checkpoint worker's; resolves when the file is closed. */
  close(): Promise<void>;
} {
  const raw = new DatabaseSync(file);
  // First, so that no statement of this connection meets a lock without waiting for it.
  raw.exec("PRAGMA busy_timeout = 5000;");
  // WAL + NORMAL: a commit survives a process crash (not a power cut) at a few µs per commit.
  raw.exec("PRAGMA journal_mode = WAL; PRAGMA synchronous = NORMAL; PRAGMA foreign_keys = ON;");
  readerPragmas(raw);
  const checkpointer = startCheckpointer(raw, file);
  let closing: Promise<void> | undefined;
  // This connection closes at once, as Kysely's destroy() expects; the worker's closes last, which
  // makes SQLite checkpoint the WAL into the database file and remove the -wal and -shm files.
  // Only then is the file closed, and only then does close() resolve.
  const close = () => {
    if (raw.isOpen) raw.close();
    closing ??= checkpointer.stop();
    return closing;
  };

  // Kysely's destroy() does not await this; openStore awaits close() itself.
  return { db: kyselyDatabase(raw, () => void close()), raw, close };
}

/**
 * Kysely's SQLite dialect, whose migrator then applies the pending migrations in one transaction,
 * as on PostgreSQL (docs/operations.md, "Migrations"). SQLite's DDL is transactional, but Kysely's
 * adapter says it is not, so each statement of a migration committed on its own: a start killed
 * in the middle of one left it half applied and unrecorded, and every later start ran it again
 * and failed ("duplicate column name"). The flag is read by Kysely's migrator only.
 */
export class MigratingSqliteDialect extends SqliteDialect {
  override createAdapter(): DialectAdapter {
    return new TransactionalDdlAdapter();
  }
}

class TransactionalDdlAdapter extends SqliteAdapter {
  override get supportsTransactionalDdl(): boolean {
    return true;
  }
}

/** The connection as Kysely's SqliteDialect takes it, its statements cached by SQL text. */
export function kyselyDatabase(raw: DatabaseSync, close: () => void): SqliteDatabase {
  const cache = new LRUCache<string, SqliteStatement>({ max: 500 });
  return {
    close,
    prepare(sql: string): SqliteStatement {
      let stmt = cache.get(sql);
      if (!stmt) {
        stmt = wrap(raw.prepare(sql));
        cache.set(sql, stmt);
      }
      return stmt;
    },
  };
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

/**
 * Monitoring reads scattered run rows (text filters scan one flow's runs): a 64 MiB page cache
 * and memory-mapped reads keep a million-run database's hot part out of read() calls.
 */
export function readerPragmas(raw: DatabaseSync): void {
  raw.exec(
    "PRAGMA cache_size = -65536; PRAGMA mmap_size = 1073741824; PRAGMA temp_store = MEMORY;",
  );
}
