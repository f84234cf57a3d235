import type { Kysely } from "kysely";
import { bundleMethods } from "./kysely-bundles.ts";
import { elementByNumber, elementMethods } from "./kysely-elements.ts";
import { flowMethods } from "./kysely-flows.ts";
import { keptMethods } from "./kysely-keep.ts";
import { monitorMethods } from "./kysely-monitor.ts";
import { revisionReads } from "./kysely-revisions.ts";
import { runLimitMethods } from "./kysely-run-limits.ts";
import { runMethods } from "./kysely-runs.ts";
import { scheduleMethods } from "./kysely-schedules.ts";
import { scriptEnvMethods } from "./kysely-script-envs.ts";
import { scriptMethods } from "./kysely-scripts.ts";
import type { Database } from "./schema.ts";
import { startedHereMethods } from "./started-here.ts";
import type { Dialect, Store } from "./types.ts";

/**
 * The Store over Kysely: one implementation, the dialect decides SQLite or PostgreSQL. `hot`, when
 * given, runs every statement but monitoring's (PostgreSQL's prepared statements,
 * store/pg-prepared.ts); monitoring and `db` itself plan each query for its own values.
 */
export function createKyselyStore(
  db: Kysely<Database>,
  dialect: Dialect,
  onClose: () => Promise<void>,
  hot: Kysely<Database> = db,
): Store & { db: Kysely<Database> } {
  return {
    ...flowMethods(hot, dialect, (id) => elementByNumber(hot, id)),
    ...bundleMethods(hot, dialect),
    ...revisionReads(hot),
    ...keptMethods(hot),
    ...scriptMethods(hot, dialect),
    ...monitorMethods(db, dialect),
    ...scheduleMethods(hot),
    ...elementMethods(hot),
    ...runMethods(hot, dialect),
    ...runLimitMethods(hot, dialect),
    ...startedHereMethods(hot),
    ...scriptEnvMethods(hot),
    db,
    dialect,
    close: onClose,
  };
}
