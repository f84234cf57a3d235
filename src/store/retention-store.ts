import type { Kysely } from "kysely";
import { deleteRunsIn } from "./kysely-runs.ts";
import type { Database } from "./schema.ts";
import type { Dialect, ElementType, Scope, ScopeFilter } from "./types.ts";
import { FINISHED } from "./types.ts";

/** An element whose runs a retention rule may purge (docs/retention.md). */
export interface RetentionElement {
  elementId: string;
  scope: Scope;
  type: ElementType;
  name: string;
  folderPath: string;
  /** Changes with every upload or deploy: a rule read from the element is cached against it. */
  updatedAt: number;
  /** DPL: the configure JSON of its release (kept through a deactivation); null: never released. */
  configureJson: string | null;
}

/** The runs of one element that ended before `cutoff` (epoch ms). */
export interface ExpiredRuns {
  elementId: string;
  scope: Scope;
  cutoff: number;
}

/** The store side of run retention, kept out of the big Store interface. */
export interface RetentionStore {
  /** Every DPL and PY element, of one scope or (null) of all. */
  elements(scope: ScopeFilter): Promise<RetentionElement[]>;
  /** The current module or package of a PY element, for its declarations. */
  scriptSource(
    elementId: string,
  ): Promise<{ kind: "module" | "package"; content: Uint8Array } | undefined>;
  /**
   * Deletes up to `limit` of the oldest finished runs that ended before the cutoff, in one short
   * transaction, through the same delete as POST /run/delete (counters, deliveries, handler
   * results). Answers the ids this call deleted; fewer than `limit` means none are left.
   */
  purgeBatch(runs: ExpiredRuns, limit: number): Promise<string[]>;
  /** How many finished runs ended before the cutoff (the dry run). */
  /** How many would go, counted no further than `cap` + 1 (an answer over `cap` means more). */
  countExpired(runs: ExpiredRuns, cap: number): Promise<number>;
}

export function createRetentionStore(db: Kysely<Database>, dialect: Dialect): RetentionStore {
  return {
    elements: (scope) => elements(db, scope),
    async scriptSource(elementId) {
      const row = await db
        .selectFrom("elements")
        .select(["kind", "content"])
        .where("id", "=", Number(elementId))
        .where("type", "=", "PY")
        .executeTakeFirst();
      if (!row?.content) return undefined;
      return { kind: row.kind === "package" ? "package" : "module", content: row.content };
    },
    purgeBatch: (runs, limit) => purgeBatch(db, dialect, runs, limit),
    async countExpired(runs, cap) {
      // A bounded read: a dry run over millions of runs must not hold SQLite's event loop.
      const row = await db
        .selectFrom(
          expired(db, runs)
            .select("id")
            .limit(cap + 1)
            .as("t"),
        )
        .select((eb) => eb.fn.countAll<number>().as("n"))
        .executeTakeFirst();
      return Number(row?.n ?? 0);
    },
  };
}

async function elements(db: Kysely<Database>, scope: ScopeFilter): Promise<RetentionElement[]> {
  const rows = await db
    .selectFrom("elements as e")
    .innerJoin("folders as f", "f.id", "e.folder_id")
    .leftJoin("flow_revisions as r", (j) =>
      j.onRef("r.element_id", "=", "e.id").onRef("r.version", "=", "e.release_version"),
    )
    .select(["e.id", "e.app", "e.space", "e.type", "e.name", "e.updated_at", "f.path"])
    .select("r.configure")
    .where("e.type", "in", ["DPL", "PY"])
    .$if(scope !== null, (q) =>
      q.where("e.app", "=", scope?.app ?? "").where("e.space", "=", scope?.space ?? ""),
    )
    .orderBy("e.id")
    .execute();
  return rows.map((r) => ({
    elementId: String(r.id),
    scope: { app: r.app, space: r.space },
    type: r.type as ElementType,
    name: r.name,
    folderPath: r.path,
    updatedAt: Number(r.updated_at),
    configureJson: r.type === "DPL" ? (r.configure ?? null) : null,
  }));
}

/**
 * An element's expired runs. Scope and element lead, then end_time: the range is read from the
 * index runs_mon_ended (migration 002), oldest first.
 */
function expired(db: Kysely<Database>, runs: ExpiredRuns) {
  return db
    .selectFrom("runs")
    .where("app", "=", runs.scope.app)
    .where("space", "=", runs.scope.space)
    .where("element_id", "=", Number(runs.elementId))
    .where("end_time", "<", runs.cutoff)
    .where("status", "in", [...FINISHED]);
}

async function purgeBatch(
  db: Kysely<Database>,
  dialect: Dialect,
  runs: ExpiredRuns,
  limit: number,
): Promise<string[]> {
  return db.transaction().execute(async (tx) => {
    const picked = await expired(tx, runs)
      .select("id")
      .orderBy("end_time")
      .limit(limit)
      // Purgers on other nodes skip the rows this one holds and take the next ones, so a cluster
      // whose nodes all purge splits the work instead of repeating it (docs/retention.md).
      .$if(dialect === "postgres", (q) => q.forUpdate().skipLocked())
      .execute();
    return deleteRunsIn(
      tx,
      null,
      picked.map((r) => r.id),
    );
  });
}
