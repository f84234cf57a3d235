import path from "node:path";
import {
  type FlowConfig,
  flowConfigOf,
  idempotencyWindow,
  type WebhooksConfig,
  webhooksConfigOf,
} from "./config-flows.ts";
import {
  databaseUrlOf,
  type Env,
  int,
  type LimitsConfig,
  limitsConfig,
  logLevel,
  whole,
} from "./config-limits.ts";
import { type PythonConfig, pythonConfig } from "./config-python.ts";
import {
  type ArtifactsConfig,
  type AuditConfig,
  artifactsConfigOf,
  auditConfigOf,
  type DataDiskConfig,
  dataDiskConfigOf,
  type RetentionConfig,
  retentionConfigOf,
} from "./config-storage.ts";
import { StartupError } from "./errors.ts";
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
  flowConfig: FlowConfig;
  /**
   * Keys of the secret values at rest (docs/secrets.md); absent: the secret endpoints answer an
   * error and flows that reference secrets fail, the rest of the service runs.
   */
  secrets: { key: Buffer | undefined; previousKey: Buffer | undefined };
  /** Completion webhooks (docs/webhooks.md); the timeout and private-address rule are flowConfig's. */
  webhooks: WebhooksConfig;
  /** How long an `Idempotency-Key` answers its first call's run (docs/idempotency.md). */
  idempotencyWindowS: number;
  /** The audit trail (docs/audit.md): AUDIT_RETENTION_DAYS (0: kept for good), AUDIT_PURGE_MS. */
  audit: AuditConfig;
  /** Limits of the files a run keeps as artifacts (docs/artifacts.md). */
  artifacts: ArtifactsConfig;
  /** Run retention (docs/retention.md). */
  retention: RetentionConfig;
  /**
   * The data directory's disk under flow runs' script nodes (docs/security.md, "Disk"):
   * SCRIPT_RUN_DISK_BYTES per run's directory, DATA_DIR_FREE_BYTES_MIN, DATA_DIR_CHECK_MS.
   */
  dataDisk: DataDiskConfig;
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
