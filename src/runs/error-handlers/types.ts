import type { Clock } from "../../clock.ts";
import type { Language } from "../../errors.ts";
import type { TaskService } from "../../scripts/task-service.ts";
import type { NoticeStore } from "../../store/kysely-notices.ts";
import type { ErrorHandlerResult, Run, Store } from "../../store/types.ts";
import type { FlowRuns } from "../flow-runs.ts";
import type { RunEvents } from "../run-events.ts";

export type HandlerEventType = "run.failure" | "run.timeout";

/** The event every handler is given (docs/flow-graph.md); times are epoch ms, null when not reached. */
export interface FailureEvent {
  event: HandlerEventType;
  runId: string;
  elementName: string;
  elementType: string;
  version: string | null;
  runStatus: string;
  triggerType: string;
  error: string | null;
  failedNodeId: string | null;
  createTime: number;
  startTime: number | null;
  endTime: number | null;
}

export interface HandlerContext {
  event: FailureEvent;
  run: Run;
  language: Language;
  /** Which attempt this is, from 1 (invoke.ts): a custom handler's run ID is derived from it. */
  attempt: number;
}

/** One handler kind: delivers once, throws on failure (the dispatcher retries). */
export interface Handler {
  kind: ErrorHandlerResult["kind"];
  deliver(ctx: HandlerContext): Promise<{ runId?: string } | undefined>;
}

/** A failure that retrying cannot fix (no SMTP configured, element missing): not retried. */
export class PermanentHandlerError extends Error {
  override name = "PermanentHandlerError";
}

export interface ErrorHandlerConfig {
  smtpUrl: string | undefined;
  smtpFrom: string;
  language: Language;
  allowPrivateWebhooks: boolean;
  /** Attempts per handler, the first included. */
  attempts: number;
  /** Delay before the 2nd attempt; doubled for each further one. */
  backoffMs: number;
  webhookTimeoutMs: number;
  /** Longest wait for a custom handler's run. */
  customWaitS: number;
  /** Bot and mail notifications under way at once on this node, half of them per app at most. */
  concurrency: number;
}

export interface ErrorHandlerDeps {
  store: Store;
  flows: Pick<FlowRuns, "start" | "waitForEnd">;
  tasks: Pick<TaskService, "submit">;
  /** The lifecycle's events: a recorded FAILURE and a sentinel call the handlers. */
  events: Pick<RunEvents, "subscribe">;
  clock: Clock;
  logger: { error(obj: unknown, msg?: string): void; warn(obj: unknown, msg?: string): void };
  config: ErrorHandlerConfig;
  /**
   * Where a FAILURE's owed notifications are cleared once their outcomes are recorded
   * (docs/error-handlers.md, "Durable"). Absent (tests over a fake store): nothing is cleared.
   */
  notices?: Pick<NoticeStore, "clear"> | undefined;
  /** Backoff sleep; tests pass an instant one. Default: a clock timer. */
  sleep?: (ms: number) => Promise<void>;
}
