import { type Locator, locateElement } from "../../elements/locator.ts";
import { ErrorCode, SluiceError } from "../../errors.ts";
import { derivedId } from "../../ids.ts";
import type { TaskService } from "../../scripts/task-service.ts";
import { type ElementType, type Scope, type Store, TERMINAL } from "../../store/types.ts";
import { isUniqueViolation } from "../../store/unique-violation.ts";
import type { FlowRuns } from "../flow-runs.ts";
import { t } from "./messages.ts";
import {
  type FailureEvent,
  type Handler,
  type HandlerContext,
  PermanentHandlerError,
} from "./types.ts";

export interface CustomHandlerDeps {
  store: Store;
  flows: Pick<FlowRuns, "start" | "waitForEnd">;
  tasks: Pick<TaskService, "submit">;
  /** How long to wait for the handler's run to end before counting the attempt as failed. */
  waitS: number;
  /**
   * Marks the run the handler is about to start, so that its own failure calls no handlers;
   * answers how to drop the mark when it does not start. Marked before the start, not after, so
   * that the guard does not rest on the start being answered before the run's end is published.
   */
  starting(runId: string): () => void;
}

/** A failed attempt that did start a run: the result names that run. */
export class HandlerRunError extends Error {
  readonly runId: string;
  constructor(message: string, runId: string) {
    super(message);
    this.runId = runId;
  }
}

/** Errors about the request itself (unknown element, not runnable, parameter refused): retrying cannot help. */
const PERMANENT = new Set<number>([
  ErrorCode.BAD_REQUEST,
  ErrorCode.ELEMENT_NOT_FOUND,
  ErrorCode.ELEMENT_NOT_UNIQUE,
  ErrorCode.FOLDER_NOT_FOUND,
  ErrorCode.FLOW_NOT_RUNNABLE,
]);

/**
 * Runs a PY or DPL element with the event as its parameter (docs/flow-graph.md): trigger API, parentRunId
 * the failed run. The attempt succeeds when that run ends SUCCESS.
 */
export function customHandler(cfg: { element: Locator }, deps: CustomHandlerDeps): Handler {
  async function typeOf(scope: Scope): Promise<ElementType> {
    const given = cfg.element.elementType;
    if (given === "PY" || given === "DPL") return given;
    try {
      await locateElement(deps.store, scope, cfg.element, "DPL");
      return "DPL";
    } catch (err) {
      if (err instanceof SluiceError && err.code === ErrorCode.ELEMENT_NOT_FOUND) return "PY";
      throw err;
    }
  }

  /** Starts the handler's run `id`; resolves as well when another send started it first. */
  async function start(ctx: HandlerContext, id: string): Promise<void> {
    const { event, run, language } = ctx;
    const scope = run.scope;
    let unmark = () => {};
    try {
      const type = await typeOf(scope);
      const common = {
        scope,
        // No initiator: with its parent, that is how its record tells it is a handler's run
        // on a node that holds no mark of it (index.ts, startedByHandler).
        user: null,
        locator: { ...cfg.element, elementType: type },
        parameter: event,
        parentRunId: run.id,
        trigger: "API" as const,
        runId: id,
      };
      // A task's failure calls no handlers (PY has no configure): only a flow is marked. It runs
      // here (inProcess), so its end, which drops the mark, is published on this node; a flow
      // with a run limit is queued and may run elsewhere, where its record tells (index.ts).
      if (type === "PY") await deps.tasks.submit(common);
      else {
        unmark = deps.starting(id);
        await deps.flows.start({ ...common, inProcess: true });
      }
    } catch (err) {
      unmark();
      // The same ID committed by another sender of this notification (a node that took it over
      // while this one still sent it): that run is this attempt's.
      if (isUniqueViolation(err)) return;
      const reason =
        err instanceof SluiceError
          ? err.messageIn(language)
          : err instanceof Error
            ? err.message
            : String(err);
      const message = t(language, "customStart", { reason });
      if (err instanceof SluiceError && PERMANENT.has(err.code))
        throw new PermanentHandlerError(message);
      throw new Error(message);
    }
  }

  return {
    kind: "custom",
    async deliver(ctx) {
      const { run, language } = ctx;
      const scope = run.scope;
      // Derived from the failed run, the event and the attempt (docs/error-handlers.md, "Durable"):
      // a send after a crash finds the run an earlier send started and waits for it instead.
      const id = handlerRunId(ctx.event, ctx.attempt);
      if (!(await deps.store.getRun(scope, id))) await start(ctx, id);
      const ended = await deps.flows.waitForEnd(scope, id, deps.waitS);
      if (!ended || !TERMINAL.has(ended.status)) {
        throw new HandlerRunError(
          t(language, "customUnfinished", { handlerRunId: id, seconds: deps.waitS }),
          id,
        );
      }
      if (ended.status !== "SUCCESS") {
        const reason = ended.error ?? ended.summary ?? "";
        throw new HandlerRunError(
          t(language, "customEnded", { handlerRunId: id, status: ended.status, reason }),
          id,
        );
      }
      return { runId: id };
    },
  };
}

/** The ID of the run a custom handler starts for `event` at attempt `attempt` (ids.ts, derivedId). */
export function handlerRunId(event: FailureEvent, attempt: number): string {
  return derivedId(event.createTime, `error-handler\n${event.runId}\n${event.event}\n${attempt}`);
}
