/**
 * The settings of flows' runs and what they send (README, configuration table): error handlers,
 * file cleanup, schedules and expressions; completion webhooks; the idempotency window.
 */
import { bool, type Env, int } from "./config-limits.ts";
import { languageOf, StartupError } from "./errors.ts";

/** Cron and configure (docs/flow-graph.md): error handlers, file retention, schedule resync. */
export interface FlowConfig {
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
}

/** Completion webhooks (docs/webhooks.md); the timeout and private-address rule are FlowConfig's. */
export interface WebhooksConfig {
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
}

/** Error handlers, file cleanup and schedules (docs/flow-graph.md, docs/scheduler.md). */
export function flowConfigOf(env: Env): FlowConfig {
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

/** Completion webhooks (docs/webhooks.md, "Configuration"). */
export function webhooksConfigOf(env: Env): WebhooksConfig {
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
export function idempotencyWindow(env: Env): number {
  const s = int(env, "IDEMPOTENCY_WINDOW_SECONDS", 86_400);
  if (!Number.isSafeInteger(s) || s < 1) {
    throw new StartupError(
      `config: IDEMPOTENCY_WINDOW_SECONDS must be a whole number of seconds, at least 1, got "${s}"`,
    );
  }
  return s;
}
