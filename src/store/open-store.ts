import fs from "node:fs";
import path from "node:path";
import { Kysely, PostgresDialect } from "kysely";
import pg from "pg";
import { withoutPassword } from "../config-limits.ts";
import { StartupError } from "../errors.ts";
import { createKyselyStore } from "./kysely-store.ts";
import { migrate } from "./migrate.ts";
import {
  createPgMonitorReads,
  MONITOR_READS_DEFAULTS,
  type MonitorReadsConfig,
} from "./pg-monitor-reads.ts";
import { preparedPool } from "./pg-prepared.ts";
import type { Database } from "./schema.ts";
import { MigratingSqliteDialect, openSqlite } from "./sqlite-driver.ts";
import { createSqliteReader } from "./sqlite-reader.ts";
import type { Store } from "./types.ts";

// int8 columns (timestamps in ms, counts) fit a JS number; pg would hand them over as strings.
pg.types.setTypeParser(20, (v) => Number(v));

export type OpenedStore = Store & { db: Kysely<Database> };

/** Network errors, and PostgreSQL's refusals of a login (SQLSTATE classes 08, 28 and 3D). */
const CANNOT_CONNECT = /^(E[A-Z]+|08...|28...|3D...)$/;

/**
 * The first connection failing is the operator's to fix (the database down, a wrong host, user,
 * password or database name): the start stops with one line naming DATABASE_URL, its password
 * hidden (docs/cluster.md). A supervisor restarting the node retries it.
 */
function unreachable(err: unknown, url: string): StartupError | undefined {
  const code = (err as { code?: unknown }).code;
  if (typeof code !== "string" || !CANNOT_CONNECT.test(code)) return undefined;
  return new StartupError(
    `cannot reach the database of DATABASE_URL "${withoutPassword(url)}": ${(err as Error).message}`,
  );
}

/** Opens and migrates the store the configuration names: PostgreSQL for a postgres:// URL, else SQLite. */
export async function openStore(opts: {
  databaseUrl?: string | undefined;
  dataDir: string;
  /** PostgreSQL only: monitoring's own pool (pg-monitor-reads.ts); its defaults when absent. */
  monitorReads?: MonitorReadsConfig | undefined;
  /** Where a connection lost while idle in the pool is reported. */
  logger?: { warn(obj: unknown, msg?: string): void } | undefined;
  /**
   * SQLite: monitoring's reading thread started now rather than at the first read (a process
   * that serves the API): loading it took the first list 250 ms, 540 ms under load. PostgreSQL's
   * reads need no thread; a connection opened ahead sat idle in its pool and kept a stopping
   * process alive for the pool's idle timeout (10 s), so none is.
   */
  warmReads?: boolean | undefined;
}): Promise<OpenedStore> {
  if (opts.databaseUrl?.startsWith("postgres")) {
    const pool = new pg.Pool({ connectionString: opts.databaseUrl, max: 10 });
    // An idle connection that breaks (PostgreSQL restarts, an administrator or an idle timeout
    // ends the session) is an 'error' event on the pool, which ends the process when nobody
    // listens. The pool has already dropped that connection; the next query opens a new one.
    const { logger } = opts;
    pool.on("error", (err) => logger?.warn({ err }, "store connection lost while idle"));
    // A connection that breaks while checked out (a statement the server refused to read, a
    // reset) rejects its query, and pg emits the same error on the client too: without a
    // listener that second report would end the process.
    pool.on("connect", (client) =>
      client.on("error", (err) => logger?.warn({ err }, "store connection lost in use")),
    );
    const db = new Kysely<Database>({ dialect: new PostgresDialect({ pool }) });
    try {
      await migrate(db as Kysely<unknown>, "postgres");
    } catch (err) {
      await db.destroy();
      throw unreachable(err, opts.databaseUrl) ?? err;
    }
    const hot = new Kysely<Database>({
      dialect: new PostgresDialect({ pool: preparedPool(pool) }),
    });
    // Monitoring reads on connections of their own (docs/security.md, "Monitoring reads").
    const reads = createPgMonitorReads(
      opts.databaseUrl,
      opts.monitorReads ?? MONITOR_READS_DEFAULTS,
      logger,
    );
    const store = createKyselyStore(
      db,
      "postgres",
      async () => {
        try {
          await reads.close();
        } finally {
          await db.destroy();
        }
      },
      hot,
    );
    const { monitorRuns, monitorFlows, listFlows } = reads;
    return { ...store, monitorRuns, monitorFlows, listFlows };
  }
  fs.mkdirSync(opts.dataDir, { recursive: true, mode: 0o700 });
  const file = path.join(opts.dataDir, "sluice.db");
  const sqlite = openSqlite(file);
  const db = new Kysely<Database>({ dialect: new MigratingSqliteDialect({ database: sqlite.db }) });
  try {
    await migrate(db as Kysely<unknown>, "sqlite");
  } catch (err) {
    await sqlite.close();
    throw err;
  }
  const reader = createSqliteReader(file);
  if (opts.warmReads) reader.warm();
  // Resolves only once no connection to the file is left, so a store opened next never meets one.
  const store = createKyselyStore(db, "sqlite", async () => {
    await reader.stop();
    await db.destroy();
    await sqlite.close();
  });
  // Monitoring reads on a thread of their own (docs/security.md, "Monitoring reads").
  const { monitorRuns, monitorFlows, listFlows } = reader;
  return { ...store, monitorRuns, monitorFlows, listFlows };
}
