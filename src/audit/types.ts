import type { Scope } from "../store/types.ts";

/** What became of an audited request (docs/audit.md, "Outcome"). */
export const AUDIT_OUTCOMES = ["success", "failure", "accepted", "refused"] as const;
export type AuditOutcome = (typeof AUDIT_OUTCOMES)[number];

/** One audit entry: who, when, from where, what and the outcome. Never changed once written. */
export interface AuditEntry {
  id: string;
  /** Epoch ms the request arrived. */
  at: number;
  app: string;
  space: string;
  user: string | null;
  /** The client's address as the socket saw it. */
  address: string | null;
  method: string;
  /** The route pattern, e.g. `/dataflow-3-0/flow/deploy`, `/dataflow-3-0/secret/:name`. */
  route: string;
  action: string;
  /** The identifiers the change named (element names, run IDs, a secret's name): never values. */
  target: Record<string, unknown>;
  outcome: AuditOutcome;
  /** The envelope code (0 on success); null when the answer carried none. */
  code: number | null;
  httpStatus: number;
  durationMs: number;
  requestId: string | null;
}

export interface AuditFilter {
  from?: number | undefined;
  to?: number | undefined;
  user?: string | undefined;
  action?: string | undefined;
  outcome?: AuditOutcome | undefined;
}

export interface AuditPage {
  totalCount: number;
  entries: AuditEntry[];
}

/** The audit table, seen only through this interface (docs/audit.md). */
export interface AuditStore {
  /** Inserts the entries in one statement. */
  insert(entries: readonly AuditEntry[]): Promise<void>;
  /** Newest first; `scope` null: every scope (auth off, no scope given). */
  list(
    scope: Scope | null,
    filter: AuditFilter,
    window: { limit: number; offset: number },
  ): Promise<AuditPage>;
  /** Deletes up to `limit` of the oldest entries older than `before`; answers how many. */
  purgeBefore(before: number, limit: number): Promise<number>;
}
