import type { Configure } from "../../flows/graph.ts";
import type { ErrorHandlerResult, Run } from "../../store/types.ts";
import { TooManyWaiting } from "../../turn-slots.ts";
import { botHandler } from "./bot.ts";
import { customHandler, HandlerRunError } from "./custom.ts";
import { emailHandler } from "./email.ts";
import type { ErrorHandlerDeps } from "./types.ts";
import { type FailureEvent, type Handler, PermanentHandlerError } from "./types.ts";

// The handlers of a configuration, and one handler's attempts (docs/error-handlers.md, "Retries").

/** The handlers a flow's configuration names. */
export function handlersOf(
  deps: ErrorHandlerDeps,
  c: Configure,
  starting: (runId: string) => () => void,
): Handler[] {
  const { config } = deps;
  const h = c.errorHandlers;
  const out: Handler[] = [];
  if (h.email)
    out.push(
      emailHandler(h.email, {
        url: config.smtpUrl,
        from: config.smtpFrom,
        timeoutMs: config.webhookTimeoutMs,
      }),
    );
  if (h.bot)
    out.push(
      botHandler(h.bot, {
        allowPrivate: config.allowPrivateWebhooks,
        timeoutMs: config.webhookTimeoutMs,
      }),
    );
  if (h.custom) {
    out.push(
      customHandler(h.custom, {
        store: deps.store,
        flows: deps.flows,
        tasks: deps.tasks,
        waitS: config.customWaitS,
        starting,
      }),
    );
  }
  return out;
}

/** One handler, retried with backoff; every outcome becomes a result, nothing is thrown. */
export async function invoke(
  deps: ErrorHandlerDeps,
  sleep: (ms: number) => Promise<void>,
  handler: Handler,
  run: Run,
  event: FailureEvent,
): Promise<ErrorHandlerResult> {
  const { clock, config } = deps;
  let attempts = 0;
  let lastError = "";
  let runId: string | undefined;
  while (attempts < config.attempts) {
    attempts++;
    try {
      const out = await handler.deliver({
        event,
        run,
        language: config.language,
        attempt: attempts,
      });
      const started = out?.runId;
      return {
        kind: handler.kind,
        ok: true,
        attempts,
        at: clock.now(),
        event: event.event,
        ...(started ? { runId: started } : {}),
      };
    } catch (err) {
      lastError = err instanceof Error ? err.message : String(err);
      if (err instanceof HandlerRunError) runId = err.runId;
      if (err instanceof TooManyWaiting) {
        lastError = `not sent: ${err.message} for a slot (ERROR_HANDLER_CONCURRENCY)`;
        break;
      }
      if (err instanceof PermanentHandlerError) break;
      if (attempts < config.attempts) await sleep(config.backoffMs * 2 ** (attempts - 1));
    }
  }
  return {
    kind: handler.kind,
    ok: false,
    attempts,
    error: lastError,
    at: clock.now(),
    event: event.event,
    ...(runId ? { runId } : {}),
  };
}
