import type { Kysely } from "kysely";
import { bundleMethods } from "./kysely-bundles.ts";
import { elementByNumber, elementMethods } from "./kysely-elements.ts";
import { flowMethods } from "./kysely-flows.ts";
import { monitorMethods } from "./kysely-monitor.ts";
import { revisionReads } from "./kysely-revisions.ts";
import { runLimitMethods } from "./kysely-run-limits.ts";
import { runMethods } from "./kysely-runs.ts";
import { scheduleMethods } from "./kysely-schedules.ts";
import { scriptEnvMethods } from "./kysely-script-envs.ts";
import { scriptMethods } from "./kysely-scripts.ts";
import type { Database } from "./schema.ts";
import type { Dialect, Store } from "./types.ts";

/** The Store over Kysely: one implementation, the dialect decides SQLite or PostgreSQL. */
export function createKyselyStore(
  db: Kysely<Database>,
  dialect: Dialect,
  onClose: () => Promise<void>,
): Store & { db: Kysely<Database> } {
  return {
    ...flowMethods(db, (id) => elementByNumber(db, id)),
    ...bundleMethods(db),
    ...revisionReads(db),
    ...scriptMethods(db),
    ...monitorMethods(db, dialect),
    ...scheduleMethods(db),
    ...elementMethods(db),
    ...runMethods(db),
    ...runLimitMethods(db, dialect),
    ...scriptEnvMethods(db),
    db,
    dialect,
    close: onClose,
  };
}
