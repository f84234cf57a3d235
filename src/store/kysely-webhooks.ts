import type { Kysely, Selectable } from "kysely";
import type { DeliveryAttempt, DeliveryStatus, WebhookDelivery } from "../webhooks/types.ts";
import { toRun } from "./rows.ts";
import type { Database, WebhookDeliveryTable } from "./schema.ts";
import type { Dialect, Run, Scope } from "./types.ts";

/** A delivery as the outbox creates it (docs/webhooks.md). */
export interface NewDelivery {
  id: string;
  runId: string;
  scope: Scope;
  url: string;
  event: string;
  body: string;
  now: number;
}

/** A delivery this node claimed: what one attempt needs. */
export interface ClaimedDelivery {
  id: string;
  runId: string;
  scope: Scope;
  url: string;
  body: string;
  attempts: number;
  log: DeliveryAttempt[];
}

/** The outcome of one attempt, written only while the claim is still this node's. */
export interface AttemptRecord {
  status: DeliveryStatus;
  attempts: number;
  log: DeliveryAttempt[];
  nextAt: number;
}

/**
 * The webhook outbox and signing secrets: a narrow store of its own, on the same database as the
 * runs (docs/webhooks.md). Every method is one statement unless said otherwise.
 */
export interface WebhookStore {
  /**
   * Creates deliveries; one that exists already (same ID) is left as it is. With `claim`, the new
   * rows are created claimed by that node; answers the IDs of the rows this call created.
   */
  addDeliveries(
    rows: readonly NewDelivery[],
    claim?: { nodeId: string; until: number },
  ): Promise<string[]>;
  /**
   * Claims up to `limit` due PENDING deliveries whose claim is free or expired, for `leaseMs`:
   * one UPDATE … RETURNING, so two nodes never claim the same row at once. Rows of the apps in
   * `skipApps` (those that have their share of attempts under way) are left for later.
   */
  claimDue(
    nodeId: string,
    now: number,
    leaseMs: number,
    limit: number,
    skipApps?: readonly string[],
  ): Promise<ClaimedDelivery[]>;
  recordAttempt(id: string, nodeId: string, rec: AttemptRecord): Promise<boolean>;
  /**
   * Frees the claims of `nodeId`, or (null) every claim: a process that owns its database; with
   * `ids`, only those rows' (claimed over an app's share, docs/webhooks.md "Fairness").
   */
  releaseClaims(nodeId: string | null, ids?: readonly string[]): Promise<void>;
  /** The earliest next attempt of a PENDING delivery, if any. */
  nextDue(): Promise<number | undefined>;
  deliveriesOf(runId: string): Promise<WebhookDelivery[]>;
  /** Ended runs with webhooks, ended at or after `since`, that have no delivery at all. */
  endedWithoutDeliveries(since: number, limit: number): Promise<Run[]>;
  /**
   * Deletes finished deliveries whose run was deleted while they were pending (a run's delete
   * takes its finished ones with it); answers how many.
   */
  pruneOrphans(): Promise<number>;
  /** The scope's signing secret; `make` supplies one on first use (two racing callers agree). */
  secret(scope: Scope, make: () => string, now: number): Promise<string>;
  /** Replaces the scope's signing secret. */
  rotateSecret(scope: Scope, secret: string, now: number): Promise<void>;
}

export function createWebhookStore(db: Kysely<Database>, dialect: Dialect): WebhookStore {
  return {
    async addDeliveries(rows, claim) {
      if (rows.length === 0) return [];
      const made = await db
        .insertInto("webhook_deliveries")
        .values(
          rows.map((r) => ({
            id: r.id,
            run_id: r.runId,
            app: r.scope.app,
            space: r.scope.space,
            url: r.url,
            event: r.event,
            body: r.body,
            status: "PENDING",
            attempts: 0,
            log: "[]",
            next_at: r.now,
            claimed_by: claim?.nodeId ?? null,
            claim_until: claim?.until ?? null,
            created_at: r.now,
          })),
        )
        .onConflict((oc) => oc.column("id").doNothing())
        .returning("id")
        .execute();
      return made.map((r) => r.id);
    },
    claimDue: (nodeId, now, leaseMs, limit, skipApps = []) =>
      claimDue(db, dialect, { nodeId, now, leaseMs, limit, skipApps }),
    async recordAttempt(id, nodeId, rec) {
      const r = await db
        .updateTable("webhook_deliveries")
        .set({
          status: rec.status,
          attempts: rec.attempts,
          log: JSON.stringify(rec.log),
          next_at: rec.nextAt,
          claimed_by: null,
          claim_until: null,
        })
        .where("id", "=", id)
        .where("claimed_by", "=", nodeId)
        .executeTakeFirst();
      return Number(r.numUpdatedRows) > 0;
    },
    async releaseClaims(nodeId, ids) {
      if (ids?.length === 0) return;
      let q = db
        .updateTable("webhook_deliveries")
        .set({ claimed_by: null, claim_until: null })
        .where("claimed_by", "is not", null);
      if (nodeId !== null) q = q.where("claimed_by", "=", nodeId);
      if (ids) q = q.where("id", "in", ids);
      await q.execute();
    },
    async nextDue() {
      const row = await db
        .selectFrom("webhook_deliveries")
        .select((eb) => eb.fn.min("next_at").as("at"))
        .where("status", "=", "PENDING")
        .executeTakeFirst();
      return row?.at == null ? undefined : Number(row.at);
    },
    async deliveriesOf(runId) {
      const rows = await db
        .selectFrom("webhook_deliveries")
        .selectAll()
        .where("run_id", "=", runId)
        .orderBy("id")
        .execute();
      return rows.map(toDelivery);
    },
    async endedWithoutDeliveries(since, limit) {
      const rows = await db
        .selectFrom("runs")
        .selectAll()
        .where("webhooks", "is not", null)
        .where("end_time", ">=", since)
        .where(({ not, exists, selectFrom }) =>
          not(
            exists(
              selectFrom("webhook_deliveries as d")
                .select("d.id")
                .whereRef("d.run_id", "=", "runs.id"),
            ),
          ),
        )
        .orderBy("end_time")
        .limit(limit)
        .execute();
      return rows.map(toRun);
    },
    async pruneOrphans() {
      const r = await db
        .deleteFrom("webhook_deliveries")
        .where("status", "<>", "PENDING")
        .where(({ not, exists, selectFrom }) =>
          not(
            exists(
              selectFrom("runs")
                .select("runs.id")
                .whereRef("runs.id", "=", "webhook_deliveries.run_id"),
            ),
          ),
        )
        .executeTakeFirst();
      return Number(r.numDeletedRows);
    },
    async secret(scope, make, now) {
      const read = () =>
        db
          .selectFrom("webhook_secrets")
          .select("secret")
          .where("app", "=", scope.app)
          .where("space", "=", scope.space)
          .executeTakeFirst();
      const found = await read();
      if (found) return found.secret;
      await db
        .insertInto("webhook_secrets")
        .values({ app: scope.app, space: scope.space, secret: make(), created_at: now })
        .onConflict((oc) => oc.columns(["app", "space"]).doNothing())
        .execute();
      const made = await read();
      if (!made) throw new Error("the signing secret was not stored");
      return made.secret;
    },
    async rotateSecret(scope, secret, now) {
      await db
        .insertInto("webhook_secrets")
        .values({ app: scope.app, space: scope.space, secret, created_at: now })
        .onConflict((oc) => oc.columns(["app", "space"]).doUpdateSet({ secret, created_at: now }))
        .execute();
    },
  };
}

async function claimDue(
  db: Kysely<Database>,
  dialect: Dialect,
  q: { nodeId: string; now: number; leaseMs: number; limit: number; skipApps: readonly string[] },
): Promise<ClaimedDelivery[]> {
  const { nodeId, now, leaseMs, limit, skipApps } = q;
  // The conditions are repeated outside the subquery: PostgreSQL re-checks those (not the
  // subquery) on a row another node updated meanwhile, so a row claimed there is skipped here.
  let due = db
    .selectFrom("webhook_deliveries")
    .select("id")
    .where("status", "=", "PENDING")
    .where("next_at", "<=", now)
    .where((eb) => eb.or([eb("claim_until", "is", null), eb("claim_until", "<", now)]))
    .orderBy("next_at")
    .limit(limit);
  if (skipApps.length > 0) due = due.where("app", "not in", skipApps);
  if (dialect === "postgres") due = due.forUpdate().skipLocked();
  const rows = await db
    .updateTable("webhook_deliveries")
    .set({ claimed_by: nodeId, claim_until: now + leaseMs })
    .where("id", "in", due)
    .where("status", "=", "PENDING")
    .where("next_at", "<=", now)
    .where((eb) => eb.or([eb("claim_until", "is", null), eb("claim_until", "<", now)]))
    .returning(["id", "run_id", "app", "space", "url", "body", "attempts", "log"])
    .execute();
  return rows.map((r) => ({
    id: r.id,
    runId: r.run_id,
    scope: { app: r.app, space: r.space },
    url: r.url,
    body: r.body,
    attempts: Number(r.attempts),
    log: JSON.parse(r.log) as DeliveryAttempt[],
  }));
}

function toDelivery(row: Selectable<WebhookDeliveryTable>): WebhookDelivery {
  const status = row.status as DeliveryStatus;
  return {
    id: row.id,
    url: row.url,
    event: row.event,
    status,
    attempts: JSON.parse(row.log) as DeliveryAttempt[],
    ...(status === "PENDING" ? { nextAttemptAt: Number(row.next_at) } : {}),
  };
}
