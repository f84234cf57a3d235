import { Kysely, PostgresDialect } from "kysely";
import pg from "pg";
import { ErrorCode, SluiceError } from "../errors.ts";
import { createTurnSlots, TooManyWaiting } from "../turn-slots.ts";
import { type MonitorMethods, monitorMethods } from "./kysely-monitor.ts";
import type { Scope } from "./model.ts";
import type { Database } from "./schema.ts";

export interface MonitorReadsConfig {
  /** Connections of their own, and so reads at once; at most half of them one app's. */
  connections: number;
  /** A read still running after this is cancelled by PostgreSQL (statement_timeout). */
  timeoutMs: number;
}

/** MONITOR_READ_CONNECTIONS and MONITOR_READ_TIMEOUT_MS when not set. */
export const MONITOR_READS_DEFAULTS: MonitorReadsConfig = { connections: 2, timeoutMs: 30_000 };

/** Reads of one app that may wait for a connection; the next is answered 429. */
const WAITING_PER_APP = 100;

/** listFlows of every scope (an operator's call) takes its turns as a tenant of its own. */
const EVERY_SCOPE: Scope = { app: "", space: "" };

/**
 * Monitoring's reads of the PostgreSQL store on a pool of their own (docs/security.md,
 * "Monitoring reads"). A text search over a flow of many runs reads every match and holds its
 * connection meanwhile: on the store's one pool, thirty of one tenant's searches took every
 * connection, and every statement of every other tenant (a run-sync's insert) waited for them
 * all. Here at most `connections` reads run at once, at most half of them one app's, the others
 * wait and take turns between tenants (src/turn-slots.ts), and PostgreSQL cancels a read that
 * runs longer than `timeoutMs`.
 */
export function createPgMonitorReads(
  connectionString: string,
  config: MonitorReadsConfig,
  logger?: { warn(obj: unknown, msg?: string): void },
): MonitorMethods & { close(): Promise<void> } {
  const pool = new pg.Pool({
    connectionString,
    max: config.connections,
    statement_timeout: config.timeoutMs,
  });
  // As the store's own pool (open-store.ts): a broken idle connection must not end the process.
  pool.on("error", (err) => logger?.warn({ err }, "monitoring connection lost while idle"));
  pool.on("connect", (client) =>
    client.on("error", (err) => logger?.warn({ err }, "monitoring connection lost in use")),
  );
  const db = new Kysely<Database>({ dialect: new PostgresDialect({ pool }) });
  const methods = monitorMethods(db, "postgres");
  const slots = createTurnSlots({
    slots: config.connections,
    perApp: Math.max(1, Math.floor(config.connections / 2)),
    waitingPerApp: WAITING_PER_APP,
  });
  const read = <T>(owner: Scope, job: () => Promise<T>): Promise<T> =>
    slots.run(owner, job).catch((err: unknown) => {
      throw refusal(err, config.timeoutMs) ?? err;
    });
  return {
    monitorRuns: (scope, elementId, query) =>
      read(scope, () => methods.monitorRuns(scope, elementId, query)),
    monitorFlows: (scope) => read(scope, () => methods.monitorFlows(scope)),
    listFlows: (scope) => read(scope ?? EVERY_SCOPE, () => methods.listFlows(scope)),
    close: () => db.destroy(),
  };
}

/** What the caller is told when its read was not made or was cancelled for taking too long. */
function refusal(err: unknown, timeoutMs: number): SluiceError | undefined {
  if (err instanceof TooManyWaiting)
    return new SluiceError(ErrorCode.TOO_MANY, [
      `${WAITING_PER_APP} monitoring reads of this app are waiting`,
    ]);
  // 57014 query_canceled: here only statement_timeout cancels a read.
  if ((err as { code?: unknown }).code === "57014")
    return new SluiceError(ErrorCode.TOO_MANY, [
      `the monitoring read took longer than ${timeoutMs} ms (MONITOR_READ_TIMEOUT_MS); narrow its filters`,
    ]);
  return undefined;
}
