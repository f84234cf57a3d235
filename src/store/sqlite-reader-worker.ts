/**
 * Monitoring's reads of one SQLite database, on a thread of their own (see sqlite-reader.ts): the
 * same Kysely queries as the service's own connection would run, one call at a time.
 */
import { DatabaseSync } from "node:sqlite";
import { parentPort, workerData } from "node:worker_threads";
import { Kysely, SqliteDialect } from "kysely";
import { type MonitorMethods, monitorMethods } from "./kysely-monitor.ts";
import type { Database } from "./schema.ts";
import { kyselyDatabase, readerPragmas } from "./sqlite-driver.ts";

export interface ReadCall {
  id: number;
  method: keyof MonitorMethods;
  args: unknown[];
}
export type ReadAnswer = { id: number; value: unknown } | { id: number; error: string };

const { file } = workerData as { file: string };
const raw = new DatabaseSync(file);
// A reader never writes: query_only makes sure of it whatever SQL reaches this connection.
raw.exec("PRAGMA busy_timeout = 5000; PRAGMA query_only = 1;");
readerPragmas(raw);
const db = new Kysely<Database>({
  dialect: new SqliteDialect({ database: kyselyDatabase(raw, () => raw.close()) }),
});
const methods = monitorMethods(db, "sqlite");
const port = parentPort;

port?.on("message", (m: ReadCall | { stop: true }) => {
  if ("stop" in m) {
    raw.close(); // before the thread ends: the file must not stay open past the store
    process.exit(0);
  }
  const call = methods[m.method] as (...args: unknown[]) => Promise<unknown>;
  call(...m.args).then(
    (value) => port.postMessage({ id: m.id, value } satisfies ReadAnswer),
    (err: unknown) =>
      port.postMessage({
        id: m.id,
        error: err instanceof Error ? err.message : String(err),
      } satisfies ReadAnswer),
  );
});
