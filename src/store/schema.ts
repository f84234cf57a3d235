import type { Generated } from "kysely";

/** Table shapes as Kysely sees them; the same columns in SQLite and PostgreSQL. */
export interface Database {
  folders: FolderTable;
  elements: ElementTable;
  flow_revisions: FlowRevisionTable;
  flow_releases: FlowReleaseTable;
  script_versions: ScriptVersionTable;
  revision_pins: RevisionPinTable;
  runs: RunTable;
  nodes: NodeTable;
  schedule_state: ScheduleStateTable;
  schedule_fires: ScheduleFireTable;
  error_handler_results: ErrorHandlerResultTable;
  webhook_deliveries: WebhookDeliveryTable;
  webhook_secrets: WebhookSecretTable;
  idempotency_keys: IdempotencyKeyTable;
}

/** One `Idempotency-Key` of a scope and endpoint (docs/idempotency.md). */
export interface IdempotencyKeyTable {
  app: string;
  space: string;
  endpoint: string;
  idem_key: string;
  /** sha256 (hex) of the canonical request the key was first used with. */
  fingerprint: string;
  run_id: string;
  created_at: number;
  expires_at: number;
  /** 1 once the run was recorded. */
  committed: number;
}

export interface ScheduleStateTable {
  schedule_id: string;
  /** Tick (epoch ms) of the schedule's last claimed fire. */
  last_run_at: number;
}

export interface ScheduleFireTable {
  schedule_id: string;
  tick: number;
}

export interface ErrorHandlerResultTable {
  id: Generated<number>;
  run_id: string;
  /** JSON of ErrorHandlerResult. */
  result: string;
}

export interface NodeTable {
  id: string;
  started_at: number;
  heartbeat_at: number;
}

export interface FolderTable {
  id: string;
  app: string;
  space: string;
  path: string;
  created_at: number;
}

export interface ElementTable {
  id: Generated<number>;
  app: string;
  space: string;
  folder_id: string;
  type: string;
  name: string;
  /** JSON object of localized titles. */
  description: string | null;
  /** DPL only: DRAFT | APPROVED | OBSOLETE. */
  status: string | null;
  /** PY only: module | package. */
  kind: string | null;
  content: Uint8Array | null;
  release_version: number | null;
  release_user: string | null;
  release_time: number | null;
  created_at: number;
  updated_at: number;
  /**
   * DPL only: the cron triggers of the release, whatever the status; the app's active schedules
   * are those of its APPROVED flows (migration 022; docs/scheduler.md, "Apps share the scheduler").
   */
  release_crons: Generated<number>;
}

export interface FlowRevisionTable {
  element_id: number;
  version: number;
  name: string;
  flow: string;
  configure: string;
  created_at: number;
  user_id: string | null;
  /** When this revision last became the release; null: never released (staged). */
  released_at: number | null;
  /** JSON ScriptPin[] pinned when it last became the release; null: pinned nothing. */
  script_pins: string | null;
}

/** The release history (docs/dataflow-service.md, "Revisions and releases"). */
export interface FlowReleaseTable {
  id: Generated<number>;
  element_id: number;
  /** The release after the change. */
  version: number | null;
  action: string;
  /** The element's status after the change. */
  status: string;
  user_id: string | null;
  at: number;
  script_pins: string | null;
}

/**
 * Migration 020: one row per script version a flow revision pins (its `script_pins`), removed
 * with the revision (docs/script-service.md, "How many versions are kept").
 */
export interface RevisionPinTable {
  element_id: number;
  version: number;
  script_id: number;
  script_version: number;
}

/** Every upload of a PY element (docs/script-service.md, "Script versions"). */
export interface ScriptVersionTable {
  element_id: number;
  version: number;
  kind: string;
  content: Uint8Array;
  sha256: string;
  size: number;
  user_id: string | null;
  created_at: number;
  /** Its environment's hash; null: no dependencies (migration 014). */
  env_hash: string | null;
  /** JSON ScriptEnv (docs/script-dependencies.md); null with env_hash. */
  env: string | null;
}

export interface RunTable {
  id: string;
  app: string;
  space: string;
  element_id: number;
  element_type: string;
  element_name: string;
  folder_id: string;
  version: string | null;
  trigger_type: string;
  status: string;
  run_name: string | null;
  run_param: string | null;
  initiator: string | null;
  parent_run_id: string | null;
  in_process: number;
  node_id: string | null;
  create_time: number;
  start_time: number | null;
  end_time: number | null;
  duration: number | null;
  summary: string | null;
  /** JSON text of the result value (SUCCESS). */
  result: string | null;
  error: string | null;
  stdout: string | null;
  stderr: string | null;
  /** JSON: node logs, error handler results and other per-run detail. */
  detail: string | null;
  /** Migration 009: the run this one re-runs or resumes, and which of the two. */
  rerun_of: string | null;
  rerun_kind: string | null;
  /** Migration 013: the element's limit of runs at once when the run was accepted; null: none. */
  run_limit: number | null;
  /** Migration 012: JSON WebhookTarget[] the run calls when it ends (docs/webhooks.md); null: none. */
  webhooks: string | null;
  /**
   * Migration 021: the node that owes this FAILURE's error-handler notifications, until their
   * outcomes are recorded (docs/error-handlers.md); null: none owed.
   */
  notify_node: string | null;
  /**
   * Migration 024: JSON FilesRemoved, when the directory the ended run kept was removed early
   * (docs/security.md, "Disk"); null: not removed so.
   */
  files_removed: string | null;
}

/** Migration 012: the webhook outbox (docs/webhooks.md). */
export interface WebhookDeliveryTable {
  /** `<runId>.<index of the target in runs.webhooks>`. */
  id: string;
  run_id: string;
  app: string;
  space: string;
  url: string;
  /** The run's end status reported. */
  event: string;
  /** The JSON sent on every attempt. */
  body: string;
  /** PENDING | DELIVERED | FAILED. */
  status: string;
  attempts: number;
  /** JSON DeliveryAttempt[]. */
  log: string;
  next_at: number;
  claimed_by: string | null;
  claim_until: number | null;
  created_at: number;
}

export interface WebhookSecretTable {
  app: string;
  space: string;
  secret: string;
  created_at: number;
}
