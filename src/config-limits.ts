/**
 * The request, output, run and memory limits of the configuration (src/config.ts), read from the
 * environment (README, "Configuration"; docs/operations.md), and the readers the rest of the
 * configuration shares.
 */

import { StartupError } from "./errors.ts";

export type Env = Record<string, string | undefined>;

export const MiB = 1024 * 1024;

/**
 * A numeric setting: every one is a count, a size or a time, so a whole number, 0 or more (absent
 * or empty: `fallback`). "abc", "-5", "1.5" or a value past 2^53 stop the start naming the
 * setting and what was given; the default is not quietly taken instead (docs/operations.md,
 * "Start-up").
 */
export const int = (env: Env, key: string, fallback: number): number => whole(env, key, fallback);

/** A yes/no setting: `true`/`false`, `1`/`0`, `yes`/`no`, `on`/`off`; a typo stops the start. */
export function bool(env: Env, key: string, fallback: boolean): boolean {
  const raw = env[key]?.toLowerCase();
  if (raw === undefined || raw === "") return fallback;
  if (["1", "true", "yes", "on"].includes(raw)) return true;
  if (["0", "false", "no", "off"].includes(raw)) return false;
  throw new StartupError(`config: ${key} must be true or false, got "${env[key]}"`);
}

export interface LimitsConfig {
  bodyBytes: number;
  /** Request bodies held at once on a node, and per app (docs/errors.md, "Bad input"). */
  bodyBytesInFlight: number;
  bodyBytesInFlightPerApp: number;
  /** After an early error answer: unread body bytes dropped at most, and the longest silence. */
  discardBytes: number;
  discardIdleMs: number;
  uploadFileBytes: number;
  zipEntries: number;
  zipUncompressedBytes: number;
  outputBytes: number;
  resultBytes: number;
  maxWaitS: number;
  maxRunS: number;
  queuedRuns: number;
  queuedRunsPerApp: number;
  /** LIMIT_QUEUED_RUNS_RESERVE: the last places, for apps with few queued runs (docs/run-limits.md). */
  queuedRunsReserve: number;
  /** LIMIT_SCHEDULED_STARTS_PER_APP: an app's cron ticks on their way at once (docs/scheduler.md). */
  scheduledStartsPerApp: number;
  nodeLogBytes: number;
  flowRunsAtOnce: number;
  /** Open event streams per app and space (docs/live-progress.md). */
  liveStreams: number;
  /** LIMIT_REVISIONS_PER_FLOW; 0: no bound (docs/dataflow-service.md, "How many revisions are kept"). */
  revisionsPerFlow: number;
  /** LIMIT_VERSIONS_PER_SCRIPT; 0: no bound (docs/script-service.md, "How many versions are kept"). */
  versionsPerScript: number;
  /** LIMIT_ELEMENTS_PER_APP; 0: no bound (docs/security.md, "What an app may hold"). */
  elementsPerApp: number;
  /** LIMIT_SCHEDULES_PER_APP; 0: no bound (docs/scheduler.md, "Apps share the scheduler"). */
  schedulesPerApp: number;
  /** LIMIT_SCHEDULE_MIN_INTERVAL_S; 0: none (docs/scheduler.md, "Apps share the scheduler"). */
  scheduleMinIntervalS: number;
  /** LIMIT_STORED_BYTES_PER_APP; 0: no bound (docs/security.md, "What an app may store"). */
  storedBytesPerApp: number;
  /** Waiting requests (event streams, long polls) on a node, and per app (docs/live-progress.md). */
  heldRequests: number;
  heldRequestsPerApp: number;
  /** Values executing runs hold on a node, and per app (docs/run-limits.md, "Values in memory"). */
  runBytesInFlight: number;
  runBytesInFlightPerApp: number;
  /** JSON answers written and not yet read on a node, and per app (docs/errors.md, "Bad input"). */
  answerBytesInFlight: number;
  answerBytesInFlightPerApp: number;
}

/** What one app may hold (docs/security.md, "What an app may hold"); 0: no bound. */
export const appBounds = (limits: LimitsConfig) => ({
  elements: limits.elementsPerApp,
  schedules: limits.schedulesPerApp,
});

/** Request, output and run limits (docs/operations.md). */
export function limitsConfig(env: Env): LimitsConfig {
  const queuedRuns = int(env, "LIMIT_QUEUED_RUNS", 10000);
  const queuedRunsPerApp = Math.min(
    queuedRuns,
    Math.max(1, int(env, "LIMIT_QUEUED_RUNS_PER_APP", Math.ceil(queuedRuns / 2))),
  );
  const heldRequests = Math.max(1, int(env, "LIMIT_HELD_REQUESTS", 4000));
  // At least a byte: a body limit of 0 is no setting Fastify takes.
  const bodyBytes = whole(env, "LIMIT_BODY_BYTES", 10 * MiB, 1);
  const resultBytes = int(env, "LIMIT_RESULT_BYTES", 16 * MiB);
  // Both at least one whole body, so that any body the limit allows is taken when none other is.
  const bodyBytesInFlight = Math.max(bodyBytes, int(env, "LIMIT_BODY_BYTES_IN_FLIGHT", 256 * MiB));
  return {
    bodyBytes,
    bodyBytesInFlight,
    bodyBytesInFlightPerApp: Math.min(
      bodyBytesInFlight,
      Math.max(
        bodyBytes,
        int(env, "LIMIT_BODY_BYTES_IN_FLIGHT_PER_APP", Math.ceil(bodyBytesInFlight / 2)),
      ),
    ),
    discardBytes: int(env, "LIMIT_DISCARD_BYTES", 256 * MiB),
    discardIdleMs: int(env, "LIMIT_DISCARD_IDLE_MS", 5000),
    uploadFileBytes: int(env, "LIMIT_UPLOAD_FILE_BYTES", 50 * MiB),
    zipEntries: int(env, "LIMIT_ZIP_ENTRIES", 1000),
    zipUncompressedBytes: int(env, "LIMIT_ZIP_UNCOMPRESSED_BYTES", 100 * MiB),
    outputBytes: int(env, "LIMIT_OUTPUT_BYTES", MiB),
    resultBytes,
    nodeLogBytes: int(env, "LIMIT_NODE_LOG_BYTES", MiB),
    maxWaitS: int(env, "MAX_WAIT_S", 3600),
    maxRunS: int(env, "MAX_RUN_S", 3600),
    queuedRuns,
    // Half the whole by default: one app alone can never take every place (docs/run-limits.md).
    queuedRunsPerApp,
    queuedRunsReserve: Math.min(
      queuedRuns - 1,
      Math.max(0, int(env, "LIMIT_QUEUED_RUNS_RESERVE", Math.floor(queuedRuns / 10))),
    ),
    // More ticks on their way than the app's queue share could only be refused by it.
    scheduledStartsPerApp: Math.max(
      1,
      int(env, "LIMIT_SCHEDULED_STARTS_PER_APP", queuedRunsPerApp),
    ),
    flowRunsAtOnce: int(env, "FLOW_CONCURRENCY", 1024),
    liveStreams: Math.max(1, int(env, "LIMIT_LIVE_STREAMS", 100)),
    revisionsPerFlow: keptCount(env, "LIMIT_REVISIONS_PER_FLOW"),
    versionsPerScript: keptCount(env, "LIMIT_VERSIONS_PER_SCRIPT"),
    elementsPerApp: keptCount(env, "LIMIT_ELEMENTS_PER_APP", 10_000),
    schedulesPerApp: keptCount(env, "LIMIT_SCHEDULES_PER_APP", 1_000),
    scheduleMinIntervalS: whole(env, "LIMIT_SCHEDULE_MIN_INTERVAL_S", 0, 0, 31_622_400),
    // 10 GiB (docs/security.md, "What an app may store").
    storedBytesPerApp: whole(env, "LIMIT_STORED_BYTES_PER_APP", 10 * 1024 * MiB),
    heldRequests,
    heldRequestsPerApp: Math.min(
      heldRequests,
      Math.max(1, int(env, "LIMIT_HELD_REQUESTS_PER_APP", Math.ceil(heldRequests / 4))),
    ),
    ...runBytesConfig(env, Math.max(bodyBytes, resultBytes)),
    // The largest answer: a run's detail (its parameter, result and node logs).
    ...answerBytesConfig(env, bodyBytes + 2 * resultBytes),
  };
}

/** LIMIT_ANSWER_BYTES_IN_FLIGHT and its per-app share (half by default), each at least `one`. */
function answerBytesConfig(env: Env, one: number) {
  const total = Math.max(one, int(env, "LIMIT_ANSWER_BYTES_IN_FLIGHT", 256 * MiB));
  const perApp = int(env, "LIMIT_ANSWER_BYTES_IN_FLIGHT_PER_APP", Math.ceil(total / 2));
  return {
    answerBytesInFlight: total,
    answerBytesInFlightPerApp: Math.min(total, Math.max(one, perApp)),
  };
}

/**
 * LIMIT_RUN_BYTES_IN_FLIGHT and its per-app share (half by default), each at least `one`: the
 * largest parameter or value one run may hold, so any run fits when nothing else executes.
 */
function runBytesConfig(env: Env, one: number) {
  const runBytesInFlight = Math.max(one, int(env, "LIMIT_RUN_BYTES_IN_FLIGHT", 256 * MiB));
  const perApp = int(env, "LIMIT_RUN_BYTES_IN_FLIGHT_PER_APP", Math.ceil(runBytesInFlight / 2));
  return {
    runBytesInFlight,
    runBytesInFlightPerApp: Math.min(runBytesInFlight, Math.max(one, perApp)),
  };
}

/**
 * A whole-number setting from `min` to `max` (absent or empty: `fallback`); anything else stops
 * the service at start, naming the setting and what was given.
 */
export function whole(
  env: Env,
  key: string,
  fallback: number,
  min = 0,
  max = Number.MAX_SAFE_INTEGER,
): number {
  const raw = env[key];
  const n = raw === undefined || raw === "" ? fallback : Number(raw);
  if (Number.isSafeInteger(n) && n >= min && n <= max) return n;
  const range = max === Number.MAX_SAFE_INTEGER ? `${min} or more` : `from ${min} to ${max}`;
  throw new StartupError(`config: ${key} must be a whole number ${range}, got "${raw}"`);
}

/**
 * A count bound: revisions or versions one element keeps (default 100), elements or active
 * schedules one app holds; 0: no bound. A version number is a 32-bit integer, so a bound above
 * 10^9 bounds nothing.
 */
const keptCount = (env: Env, key: string, fallback = 100) =>
  whole(env, key, fallback, 0, 1_000_000_000);

const LOG_LEVELS = ["fatal", "error", "warn", "info", "debug", "trace", "silent"];

export function logLevel(raw: string | undefined): string {
  if (raw === undefined || raw === "") return "info";
  if (LOG_LEVELS.includes(raw)) return raw;
  throw new StartupError(`config: LOG_LEVEL must be one of ${LOG_LEVELS.join(", ")}, got "${raw}"`);
}

/**
 * A URL as it may be shown: its password replaced, so a message naming it never leaks one; pg
 * also reads one from the query string (`?password=`). What does not parse as
 * scheme://user:password@host has whatever comes before an `@` hidden.
 */
export function withoutPassword(url: string): string {
  try {
    const u = new URL(url);
    // No host: not read as user:password@host ("sluice:hunter2@db" is a scheme and a path).
    if (u.host !== "") {
      if (u.password) u.password = "***";
      if (u.searchParams.has("password")) u.searchParams.set("password", "***");
      return u.href;
    }
  } catch {}
  const at = url.lastIndexOf("@");
  return at < 0 ? url : `***${url.slice(at)}`;
}

/** DATABASE_URL: empty for embedded mode, else a PostgreSQL URL (anything else is a mistake). */
export function databaseUrlOf(raw: string | undefined): string | undefined {
  if (raw === undefined || raw === "") return undefined;
  if (/^postgres(ql)?:\/\//.test(raw)) return raw;
  throw new StartupError(
    `config: DATABASE_URL must be a postgres:// or postgresql:// URL (unset: embedded SQLite), got "${withoutPassword(raw)}"`,
  );
}
