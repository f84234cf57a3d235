import type { Language } from "../../errors.ts";
import type { ErrorHandlerResult, Run } from "../../store/types.ts";

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
