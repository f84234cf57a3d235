/**
 * The settings of what is kept, and for how long (README, configuration table): run retention,
 * the audit trail, artifacts, and the data directory's disk.
 */
import { type Env, int, MiB, whole } from "./config-limits.ts";
import { StartupError } from "./errors.ts";

/** Run retention (docs/retention.md). */
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

/** The audit trail (docs/audit.md): AUDIT_RETENTION_DAYS (0: kept for good), AUDIT_PURGE_MS. */
export interface AuditConfig {
  retentionDays: number;
  purgeMs: number;
}

/** Limits of the files a run keeps as artifacts (docs/artifacts.md). */
export interface ArtifactsConfig {
  maxFileBytes: number;
  maxRunBytes: number;
  maxFiles: number;
  /** Bytes of downloads in flight on a node, and per app (docs/artifacts.md, "Downloads"). */
  downloadBytes: number;
  downloadBytesPerApp: number;
}

/**
 * The data directory's disk under flow runs' script nodes (docs/security.md, "Disk"):
 * SCRIPT_RUN_DISK_BYTES per run's directory, DATA_DIR_FREE_BYTES_MIN, DATA_DIR_CHECK_MS.
 */
export interface DataDiskConfig {
  runBytes: number;
  freeBytesMin: number;
  checkMs: number;
  keptBytesPerApp: number;
}

/** Run retention (docs/retention.md): whole numbers, refused at start otherwise. */
export function retentionConfigOf(env: Env): RetentionConfig {
  return {
    days: whole(env, "RUN_RETENTION_DAYS", 0, 0, 36_500),
    batch: env.RUN_RETENTION_BATCH ? whole(env, "RUN_RETENTION_BATCH", 0, 1, 10_000) : undefined,
    sweepMs: whole(env, "RUN_RETENTION_SWEEP_MS", 900_000, 0, 86_400_000),
  };
}

/** AUDIT_RETENTION_DAYS and AUDIT_PURGE_MS (docs/audit.md, "Retention"). */
export function auditConfigOf(env: Env): AuditConfig {
  const retentionDays = int(env, "AUDIT_RETENTION_DAYS", 365);
  if (!Number.isSafeInteger(retentionDays) || retentionDays < 0) {
    throw new StartupError(
      `config: AUDIT_RETENTION_DAYS must be a whole number of days (0: keep), got "${retentionDays}"`,
    );
  }
  return { retentionDays, purgeMs: int(env, "AUDIT_PURGE_MS", 3_600_000) };
}

/** ARTIFACT_MAX_FILE_BYTES, …_RUN_BYTES, …_FILES, …_DOWNLOAD_BYTES[_PER_APP] (docs/artifacts.md). */
export function artifactsConfigOf(env: Env): ArtifactsConfig {
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

/**
 * SCRIPT_RUN_DISK_BYTES, DATA_DIR_FREE_BYTES_MIN, SCRIPT_KEPT_BYTES_PER_APP (0: off; by default
 * four runs' budgets) and DATA_DIR_CHECK_MS (docs/security.md, "Disk").
 */
export function dataDiskConfigOf(env: Env): DataDiskConfig {
  const runBytes = whole(env, "SCRIPT_RUN_DISK_BYTES", 1024 * MiB);
  return {
    runBytes,
    freeBytesMin: whole(env, "DATA_DIR_FREE_BYTES_MIN", 256 * MiB),
    checkMs: whole(env, "DATA_DIR_CHECK_MS", 250, 10),
    keptBytesPerApp: whole(env, "SCRIPT_KEPT_BYTES_PER_APP", 4 * (runBytes || 1024 * MiB)),
  };
}
