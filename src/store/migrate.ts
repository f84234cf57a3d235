import { type Kysely, type Migration, Migrator } from "kysely";
import * as m001 from "./migrations/001-init.ts";
import * as m002 from "./migrations/002-monitor.ts";
import * as m003 from "./migrations/003-nodes.ts";
import * as m004 from "./migrations/004-schedules.ts";
import * as m005 from "./migrations/005-search-columns.ts";
import * as m006 from "./migrations/006-monitor-counters.ts";
import * as m007 from "./migrations/007-monitor-trigram.ts";
import * as m008 from "./migrations/008-revisions.ts";
import * as m009 from "./migrations/009-rerun-link.ts";
import * as m010 from "./migrations/010-idempotency.ts";
import * as m011 from "./migrations/011-secrets.ts";
import * as m012 from "./migrations/012-webhooks.ts";
import * as m013 from "./migrations/013-run-limits.ts";
import * as m014 from "./migrations/014-script-envs.ts";
import * as m016 from "./migrations/016-audit.ts";
import * as m017 from "./migrations/017-artifacts.ts";
import * as m018 from "./migrations/018-search-finished-runs.ts";
import * as m019 from "./migrations/019-partial-parent-index.ts";
import * as m020 from "./migrations/020-revision-pins.ts";
import * as m021 from "./migrations/021-notify-owed.ts";
import * as m022 from "./migrations/022-release-crons.ts";
import * as m023 from "./migrations/023-stored-bytes.ts";
import * as m024 from "./migrations/024-files-removed.ts";
import * as m025 from "./migrations/025-stored-created-bytes.ts";
import type { Dialect } from "./types.ts";

interface MigrationModule {
  up(db: Kysely<unknown>, dialect: Dialect): Promise<void>;
}

/** Numbered migrations, applied in order; each knows both dialects. */
const MIGRATIONS: Record<string, MigrationModule> = {
  "001-init": m001,
  "002-monitor": m002,
  "003-nodes": m003,
  "004-schedules": m004,
  "005-search-columns": m005,
  "006-monitor-counters": m006,
  "007-monitor-trigram": m007,
  "008-revisions": m008,
  "009-rerun-link": m009,
  "010-idempotency": m010,
  "011-secrets": m011,
  "012-webhooks": m012,
  "013-run-limits": m013,
  "014-script-envs": m014,
  "016-audit": m016,
  "017-artifacts": m017,
  "018-search-finished-runs": m018,
  "019-partial-parent-index": m019,
  "020-revision-pins": m020,
  "021-notify-owed": m021,
  "022-release-crons": m022,
  "023-stored-bytes": m023,
  "024-files-removed": m024,
  "025-stored-created-bytes": m025,
};

/** Applies every migration, or (tests of an upgrade) those up to and including `upTo`. */
export async function migrate(db: Kysely<unknown>, dialect: Dialect, upTo?: string): Promise<void> {
  const migrations: Record<string, Migration> = {};
  for (const [name, mod] of Object.entries(MIGRATIONS)) {
    migrations[name] = { up: (k) => mod.up(k, dialect) };
  }
  // In name order only: 008 and 009 ship together, so no database a release wrote has one
  // without the other below it (docs/operations.md, "Migrations").
  const migrator = new Migrator({ db, provider: { getMigrations: async () => migrations } });
  const { error } = upTo ? await migrator.migrateTo(upTo) : await migrator.migrateToLatest();
  if (error) throw error;
}
