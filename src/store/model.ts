/** The records the store keeps (docs/architecture.md): shared by the Store interface and its parts. */

import type { WebhookTarget } from "../webhooks/types.ts";

export interface Scope {
  app: string;
  space: string;
}

/** A lookup by ID in auth mode `off` without headers is not limited to a scope (docs/auth.md). */
export type ScopeFilter = Scope | null;

/** The two databases the store runs on (embedded SQLite, cluster PostgreSQL). */
export type Dialect = "sqlite" | "postgres";

export type ElementType = "DPL" | "PY";
export type FlowStatus = "DRAFT" | "APPROVED" | "OBSOLETE";
/** The statuses a run ends in: the one definition (docs/architecture.md, "Limits"). */
export const FINISHED = ["SUCCESS", "FAILURE", "CANCELED"] as const;
export type FinishedStatus = (typeof FINISHED)[number];
export type RunStatus = "QUEUED" | "STARTED" | FinishedStatus;
export type TriggerType = "API" | "SCHEDULED" | "SYNC" | "ASYNC";

export const TERMINAL: ReadonlySet<RunStatus> = new Set<RunStatus>(FINISHED);

export interface Folder {
  id: string;
  path: string;
}

export interface Element {
  id: string;
  scope: Scope;
  folderId: string;
  path: string;
  type: ElementType;
  name: string;
  description: Record<string, string> | null;
  status: FlowStatus | null;
  releaseVersion: number | null;
  releaseUser: Record<string, unknown> | null;
  releaseTime: number | null;
  createdAt: number;
  updatedAt: number;
}

export interface ScriptElement extends Element {
  kind: "module" | "package";
  content: Uint8Array;
}

/** How a run repeats an earlier one (docs/dataflow-service.md, "Re-run and resume"). */
export type RerunKind = "rerun" | "resume";
export interface RerunLink {
  runId: string;
  kind: RerunKind;
}

export interface Run {
  id: string;
  scope: Scope;
  elementId: string;
  elementType: ElementType;
  elementName: string;
  folderId: string;
  version: string | null;
  triggerType: TriggerType;
  status: RunStatus;
  runName: string | null;
  runParam: string | null;
  initiator: Record<string, unknown> | null;
  parentRunId: string | null;
  inProcess: boolean;
  nodeId: string | null;
  createTime: number;
  startTime: number | null;
  endTime: number | null;
  duration: number | null;
  summary: string | null;
  /** JSON text of the result value, as stored. */
  result: string | null;
  error: string | null;
  stdout: string | null;
  stderr: string | null;
  detail: Record<string, unknown> | null;
  /** The run this one re-runs or resumes; null for every other run. */
  rerunOf: RerunLink | null;
  /** Runs of its element allowed at once, as when this run was accepted (docs/run-limits.md). */
  runLimit?: number | null;
  /** The URLs called when the run ends (docs/webhooks.md); absent or null: none. */
  webhooks?: WebhookTarget[] | null;
  /** Its kept working directory was removed early (docs/security.md, "Disk"); absent: not so. */
  filesRemoved?: FilesRemoved;
}

/**
 * Why and when the working directory an ended run kept on its node went before its `fileCleanup`
 * said: its app's kept directories past SCRIPT_KEPT_BYTES_PER_APP, or the data directory below
 * DATA_DIR_FREE_BYTES_MIN (docs/security.md, "Disk", "Kept directories").
 */
export interface FilesRemoved {
  time: number;
  reason: string;
}

/**
 * What one app may hold (docs/security.md, "What an app may hold"): its elements, flows and
 * scripts of all its spaces together (LIMIT_ELEMENTS_PER_APP), and its active schedules, the cron
 * triggers of its APPROVED flows' releases (LIMIT_SCHEDULES_PER_APP); 0: no bound.
 */
export interface AppBounds {
  elements: number;
  schedules: number;
}
