import path from "node:path";
import {
  bool,
  databaseUrlOf,
  type Env,
  int,
  type LimitsConfig,
  limitsConfig,
  logLevel,
  MiB,
  whole,
} from "./config-limits.ts";
import { type PythonConfig, pythonConfig } from "./config-python.ts";
import { languageOf, StartupError } from "./errors.ts";
import { parseKey } from "./secrets/crypto.ts";
import { MONITOR_READS_DEFAULTS } from "./store/pg-monitor-reads.ts";

/** Every knob of the service, read once from the environment (README, configuration table). */
export interface Config {
  port: number;
  host: string;
  dataDir: string;
  databaseUrl: string | undefined;
  /** PostgreSQL's monitoring reads: their own connections and time limit (docs/security.md). */
  monitorReads: { connections: number; timeoutMs: number };
  mode: "embedded" | "cluster";
  dataflowPrefix: string;
  scriptPrefix: string;
  logLevel: string;
  auth: {
    mode: "off" | "signature";
    appSecrets: Record<string, string>;
    internalSecret: string | undefined;
    sessionSecret: string | undefined;
    tokenTtlS: number;
  };
  smtpUrl: string | undefined;
  limits: LimitsConfig;
  python: PythonConfig;
  timeZone: string;
  /** `all`: API and worker in one process; `api`: HTTP only (plus in-process runs); `worker`: queue only. */
  role: "all" | "api" | "worker";
  heartbeatMs: number;
  heartbeatTimeoutMs: number;
  /** How often a node ends the runs STARTED by it that it does not execute (docs/cluster.md). */
  orphanSweepMs: number;
  /** SHUTDOWN_GRACE_S: on SIGTERM, how long running work may finish (docs/operations.md). */
  shutdownGraceS: number;
  /** Cron and configure (docs/flow-graph.md): error handlers, file retention, schedule resync. */
  flowConfig: {
    smtpFrom: string;
    /** Language of handler notifications and the handler errors recorded on runs. */
    notifyLanguage: "en" | "zh-cn";
    allowPrivateWebhooks: boolean;
    /** http nodes may call loopback, private and link-local addresses (docs/flow-graph.md). */
    allowPrivateHttp: boolean;
    handlerAttempts: number;
    handlerBackoffMs: number;
    /** Bot and mail notifications under way at once on a node (docs/error-handlers.md). */
    handlerConcurrency: number;
    /** Owed notifications of runs ended longer ago are not sent (docs/error-handlers.md). */
    handlerRecoverMs: number;
    webhookTimeoutMs: number;
    customHandlerWaitS: number;
    fileRetentionDays: number;
    fileSweepMs: number;
    scheduleSyncMs: number;
    /** The expression processes (docs/flow-graph.md, "Expression limits"). */
    expressions: { processes: number; timeoutMs: number; memoryMb: number; inlineMs: number };
  };
  /**
   * Keys of the secret values at rest (docs/secrets.md); absent: the secret endpoints answer an
   * error and flows that reference secrets fail, the rest of the service runs.
   */
  secrets: { key: Buffer | undefined; previousKey: Buffer | undefined };
  /** Completion webhooks (docs/webhooks.md); the timeout and private-address rule are flowConfig's. */
  webhooks: {
    attempts: number;
    backoffMs: number;
    maxBackoffMs: number;
    pollMs: number;
    concurrency: number;
    /** WEBHOOK_CONCURRENCY_PER_APP: one app's share of `concurrency` (docs/webhooks.md, "Fairness"). */
    concurrencyPerApp: number;
    inlineResultBytes: number;
    publicUrl: string;
    recoverWindowMs: number;
  };
  /** How long an `Idempotency-Key` answers its first call's run (docs/idempotency.md). */
  idempotencyWindowS: number;
  /** The audit trail (docs/audit.md): AUDIT_RETENTION_DAYS (0: kept for good), AUDIT_PURGE_MS. */
  audit: { retentionDays: number; purgeMs: number };
  /** Limits of the files a run keeps as artifacts (docs/artifacts.md). */
  artifacts: {
    maxFileBytes: number;
    maxRunBytes: number;
    maxFiles: number;
    /** Bytes of downloads in flight on a node, and per app (docs/artifacts.md, "Downloads"). */
    downloadBytes: number;
    downloadBytesPerApp: number;
  };
  /** Run retention (docs/retention.md). */
  retention: RetentionConfig;
  /**
   * The data directory's disk under flow runs' script nodes (docs/security.md, "Disk"):
   * SCRIPT_RUN_DISK_BYTES per run's directory, DATA_DIR_FREE_BYTES_MIN, DATA_DIR_CHECK_MS.
   */
  dataDisk: { runBytes: number; freeBytesMin: number; checkMs: number; keptBytesPerApp: number };
}

export interface RetentionConfig {
  /** RUN_RETENTION_DAYS: days a finished run is kept after its end; 0: for good. */
  days: number;
  /**
   * RUN_RETENTION_BATCH: runs deleted per transaction; unset: the wiring picks one for the store
   * (docs/retention.md, "Batches").
   */
  batch: number | undefined;
  /** RUN_RETENTION_SWEEP_MS: time between purge passes; 0: no timer. */
  sweepMs: number;
}

/** `app1=secret1,app2=secret2` */
export function parseAppSecrets(raw: string | undefined): Record<string, string> {
  const out: Record<string, string> = {};
  for (const pair of (raw ?? "").split(",")) {
    const eq = pair.indexOf("=");
    if (eq > 0) out[pair.slice(0, eq).trim()] = pair.slice(eq + 1).trim();
  }
  return out;
}

function role(raw: string | undefined): Config["role"] {
  if (raw === undefined || raw === "") return "all";
  if (raw === "all" || raw === "api" || raw === "worker") return raw;
  throw new StartupError(`config: SLUICE_ROLE must be all, api or worker, got "${raw}"`);
}

export function loadConfig(env: Env = process.env): Config {
  const databaseUrl = databaseUrlOf(env.DATABASE_URL);
  const authMode = env.AUTH_MODE ?? "off";
  if (authMode !== "off" && authMode !== "signature") {
    throw new StartupError(`config: AUTH_MODE must be "off" or "signature", got "${authMode}"`);
  }
  return {
    port: whole(env, "PORT", 8080, 0, 65_535),
    host: env.HOST ?? "127.0.0.1",
    dataDir: path.resolve(env.DATA_DIR ?? "./data"),
    databaseUrl,
    monitorReads: {
      connections: Math.max(
        1,
        int(env, "MONITOR_READ_CONNECTIONS", MONITOR_READS_DEFAULTS.connections),
      ),
      timeoutMs: Math.max(1, int(env, "MONITOR_READ_TIMEOUT_MS", MONITOR_READS_DEFAULTS.timeoutMs)),
    },
    mode: databaseUrl ? "cluster" : "embedded",
    dataflowPrefix: env.DATAFLOW_PREFIX ?? "/dataflow-3-0",
    scriptPrefix: env.SCRIPT_PREFIX ?? "/script",
    logLevel: logLevel(env.LOG_LEVEL),
    auth: {
      mode: authMode,
      appSecrets: parseAppSecrets(env.AUTH_APP_SECRETS),
      internalSecret: env.AUTH_INTERNAL_SECRET || undefined,
      sessionSecret: env.AUTH_SESSION_SECRET || undefined,
      tokenTtlS: int(env, "AUTH_TOKEN_TTL_S", 300),
    },
    smtpUrl: env.SMTP_URL || undefined,
    limits: limitsConfig(env),
    python: pythonConfig(env),
    timeZone: env.TZ_RUN_NAMES ?? "UTC",
    role: role(env.SLUICE_ROLE),
    heartbeatMs: int(env, "HEARTBEAT_MS", 5000),
    heartbeatTimeoutMs: int(env, "HEARTBEAT_TIMEOUT_MS", 30000),
    // ORPHAN_SWEEP_MS: whole milliseconds, at least 10 (docs/cluster.md).
    orphanSweepMs: whole(env, "ORPHAN_SWEEP_MS", 60_000, 10),
    // At most a day: the process's last-resort exit timer is a plain timer (docs/operations.md).
    shutdownGraceS: whole(env, "SHUTDOWN_GRACE_S", 30, 0, 86_400),
    flowConfig: flowConfigOf(env),
    secrets: {
      key: env.SECRETS_KEY ? parseKey(env.SECRETS_KEY, "SECRETS_KEY") : undefined,
      previousKey: env.SECRETS_KEY_PREVIOUS
        ? parseKey(env.SECRETS_KEY_PREVIOUS, "SECRETS_KEY_PREVIOUS")
        : undefined,
    },
    webhooks: webhooksConfigOf(env),
    idempotencyWindowS: idempotencyWindow(env),
    audit: auditConfigOf(env),
    artifacts: artifactsConfigOf(env),
    retention: retentionConfigOf(env),
    dataDisk: dataDiskConfigOf(env),
  };
}

/**
 * SCRIPT_RUN_DISK_BYTES, DATA_DIR_FREE_BYTES_MIN, SCRIPT_KEPT_BYTES_PER_APP (0: off; by default
 * four runs' budgets) and DATA_DIR_CHECK_MS (docs/security.md, "Disk").
 */
function dataDiskConfigOf(env: Env): Config["dataDisk"] {
  const runBytes = whole(env, "SCRIPT_RUN_DISK_BYTES", 1024 * MiB);
  return {
    runBytes,
    freeBytesMin: whole(env, "DATA_DIR_FREE_BYTES_MIN", 256 * MiB),
    checkMs: whole(env, "DATA_DIR_CHECK_MS", 250, 10),
    keptBytesPerApp: whole(env, "SCRIPT_KEPT_BYTES_PER_APP", 4 * (runBytes || 1024 * MiB)),
  };
}

/** Run retention (docs/retention.md): whole numbers, refused at start otherwise. */
function retentionConfigOf(env: Env): RetentionConfig {
  return {
    days: whole(env, "RUN_RETENTION_DAYS", 0, 0, 36_500),
    batch: env.RUN_RETENTION_BATCH ? whole(env, "RUN_RETENTION_BATCH", 0, 1, 10_000) : undefined,
    sweepMs: whole(env, "RUN_RETENTION_SWEEP_MS", 900_000, 0, 86_400_000),
  };
}

/** Completion webhooks (docs/webhooks.md, "Configuration"). */
function webhooksConfigOf(env: Env): Config["webhooks"] {
  const concurrency = Math.max(1, int(env, "WEBHOOK_CONCURRENCY", 32));
  return {
    attempts: Math.max(1, int(env, "WEBHOOK_ATTEMPTS", 10)),
    backoffMs: int(env, "WEBHOOK_BACKOFF_MS", 1000),
    maxBackoffMs: int(env, "WEBHOOK_MAX_BACKOFF_MS", 3_600_000),
    pollMs: Math.max(10, int(env, "WEBHOOK_POLL_MS", 1000)),
    concurrency,
    // Half by default: an app whose receiver never answers leaves the other half to the others.
    concurrencyPerApp: Math.min(
      concurrency,
      Math.max(1, int(env, "WEBHOOK_CONCURRENCY_PER_APP", Math.ceil(concurrency / 2))),
    ),
    inlineResultBytes: int(env, "WEBHOOK_INLINE_RESULT_BYTES", 64 * 1024),
    publicUrl: (env.WEBHOOK_PUBLIC_URL ?? "").replace(/\/+$/, ""),
    recoverWindowMs: int(env, "WEBHOOK_RECOVER_HOURS", 24) * 3_600_000,
  };
}

/** IDEMPOTENCY_WINDOW_SECONDS: whole seconds, at least 1 (docs/idempotency.md). */
function idempotencyWindow(env: Env): number {
  const s = int(env, "IDEMPOTENCY_WINDOW_SECONDS", 86_400);
  if (!Number.isSafeInteger(s) || s < 1) {
    throw new StartupError(
      `config: IDEMPOTENCY_WINDOW_SECONDS must be a whole number of seconds, at least 1, got "${s}"`,
    );
  }
  return s;
}

/** Error handlers, file cleanup and schedules (docs/flow-graph.md, docs/scheduler.md). */
function flowConfigOf(env: Env): Config["flowConfig"] {
  return {
    smtpFrom: env.SMTP_FROM ?? "sluice@localhost",
    notifyLanguage: languageOf(env.NOTIFY_LANGUAGE),
    allowPrivateWebhooks: bool(env, "WEBHOOK_ALLOW_PRIVATE", true),
    allowPrivateHttp: bool(env, "FLOW_HTTP_ALLOW_PRIVATE", true),
    handlerAttempts: Math.max(1, int(env, "ERROR_HANDLER_ATTEMPTS", 3)),
    handlerBackoffMs: int(env, "ERROR_HANDLER_BACKOFF_MS", 2000),
    handlerConcurrency: Math.max(1, int(env, "ERROR_HANDLER_CONCURRENCY", 32)),
    handlerRecoverMs: int(env, "ERROR_HANDLER_RECOVER_HOURS", 24) * 3_600_000,
    webhookTimeoutMs: int(env, "WEBHOOK_TIMEOUT_MS", 10000),
    customHandlerWaitS: int(env, "CUSTOM_HANDLER_WAIT_S", 300),
    fileRetentionDays: int(env, "FILE_RETENTION_DAYS", 7),
    fileSweepMs: int(env, "FILE_SWEEP_MS", 3_600_000),
    scheduleSyncMs: int(env, "SCHEDULE_SYNC_MS", 30_000),
    expressions: {
      processes: Math.max(1, int(env, "FLOW_EXPR_PROCESSES", 2)),
      timeoutMs: Math.max(1, int(env, "FLOW_EXPR_TIMEOUT_MS", 5000)),
      memoryMb: Math.max(16, int(env, "FLOW_EXPR_MEMORY_MB", 512)),
      inlineMs: Math.max(0, int(env, "FLOW_EXPR_INLINE_MS", 50)),
    },
  };
}

/** AUDIT_RETENTION_DAYS and AUDIT_PURGE_MS (docs/audit.md, "Retention"). */
function auditConfigOf(env: Env): Config["audit"] {
  const retentionDays = int(env, "AUDIT_RETENTION_DAYS", 365);
  if (!Number.isSafeInteger(retentionDays) || retentionDays < 0) {
    throw new StartupError(
      `config: AUDIT_RETENTION_DAYS must be a whole number of days (0: keep), got "${retentionDays}"`,
    );
  }
  return { retentionDays, purgeMs: int(env, "AUDIT_PURGE_MS", 3_600_000) };
}

/** ARTIFACT_MAX_FILE_BYTES, …_RUN_BYTES, …_FILES, …_DOWNLOAD_BYTES[_PER_APP] (docs/artifacts.md). */
function artifactsConfigOf(env: Env): Config["artifacts"] {
  const bytes = (key: string, fallback: number) => whole(env, key, fallback);
  const maxFileBytes = bytes("ARTIFACT_MAX_FILE_BYTES", 16 * MiB);
  // A file kept is always downloadable: a share holds at least one file of the largest size.
  const downloadBytes = Math.max(maxFileBytes, bytes("ARTIFACT_DOWNLOAD_BYTES", 256 * MiB));
  const perApp = bytes("ARTIFACT_DOWNLOAD_BYTES_PER_APP", Math.ceil(downloadBytes / 4));
  return {
    maxFileBytes,
    maxRunBytes: bytes("ARTIFACT_MAX_RUN_BYTES", 64 * MiB),
    maxFiles: bytes("ARTIFACT_MAX_FILES", 1000),
    downloadBytes,
    downloadBytesPerApp: Math.min(downloadBytes, Math.max(maxFileBytes, perApp)),
  };
}
