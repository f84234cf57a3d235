/**
 * Error handlers (docs/flow-graph.md): on a run's FAILURE, and once when a sentinel timeout passes, every
 * configured handler is invoked independently, retried with backoff, and its outcome recorded on
 * the run. Nothing here can change or lose the run: every failure becomes a recorded result.
 */
import { LRUCache } from "lru-cache";
import { type Clock, sleep } from "../../clock.ts";
import type { Language } from "../../errors.ts";
import { type Configure, normalizeConfigure } from "../../flows/graph.ts";
import type { TaskService } from "../../scripts/task-service.ts";
import type { ErrorHandlerResult, Run, RunEnd, Store } from "../../store/types.ts";
import { createTurnSlots, TooManyWaiting, type TurnSlots } from "../../turn-slots.ts";
import type { FlowRuns } from "../flow-runs.ts";
import type { RunEvent, RunEvents, RunFacts } from "../run-events.ts";
import { botHandler } from "./bot.ts";
import { customHandler, HandlerRunError } from "./custom.ts";
import { emailHandler } from "./email.ts";
import { t } from "./messages.ts";
import {
  type FailureEvent,
  type Handler,
  type HandlerEventType,
  PermanentHandlerError,
} from "./types.ts";

/** Notifications of one app waiting for a slot at most; past it one is recorded as not sent. */
const WAITING_PER_APP = 1000;

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
  /** Backoff sleep; tests pass an instant one. Default: a clock timer. */
  sleep?: (ms: number) => Promise<void>;
}

export interface ErrorHandlers {
  /** Invokes every configured handler for the event; resolves with the recorded outcomes. */
  notify(
    run: Run,
    configure: Configure,
    event: HandlerEventType,
    error?: string,
  ): Promise<ErrorHandlerResult[]>;
  /** Resolves once every notification under way has been recorded (tests, shutdown). */
  idle(): Promise<void>;
  /** Runs whose notifications are under way: sending, waiting for a slot or for a retry. */
  pending(): number;
}

export function eventOf(run: Run, event: HandlerEventType, error?: string): FailureEvent {
  const failed = run.detail?.failedNodeId;
  return {
    event,
    runId: run.id,
    elementName: run.elementName,
    elementType: run.elementType,
    version: run.version,
    runStatus: run.status,
    triggerType: run.triggerType,
    error: error ?? run.error,
    failedNodeId: typeof failed === "string" ? failed : null,
    createTime: run.createTime,
    startTime: run.startTime,
    endTime: run.endTime,
  };
}

/** The state of the handlers: their dependencies and the notifications under way. */
interface Handlers extends ErrorHandlerDeps {
  sleep: (ms: number) => Promise<void>;
  inFlight: Set<Promise<unknown>>;
  /**
   * Runs started by a custom handler: their own failure must not call handlers again (no loops).
   * Bounded: a mark whose run ends elsewhere is never dropped here, and the run's record tells
   * without it (startedByHandler).
   */
  handlerRuns: LRUCache<string, true>;
  /** Where bot and mail notifications wait for a slot, apps taking turns (src/turn-slots.ts). */
  slots: TurnSlots;
}

export function createErrorHandlers(deps: ErrorHandlerDeps): ErrorHandlers {
  const s: Handlers = {
    ...deps,
    sleep: deps.sleep ?? ((ms: number) => sleep(deps.clock, ms)),
    inFlight: new Set(),
    handlerRuns: new LRUCache({ max: 1_000 }),
    slots: createTurnSlots({
      slots: deps.config.concurrency,
      perApp: Math.ceil(deps.config.concurrency / 2),
      waitingPerApp: WAITING_PER_APP,
    }),
  };
  deps.events.subscribe((e: RunEvent) => {
    if (e.type === "ended") ended(s, e.runId, e.end, e.run, e.configure);
    else if (e.type === "sentinel") sentinel(s, e.runId, e.configure, e.seconds);
  });
  return {
    notify: (run, configure, event, error) => notify(s, run, configure, event, error),
    async idle() {
      while (s.inFlight.size > 0) await Promise.all(s.inFlight);
    },
    pending: () => s.inFlight.size,
  };
}

async function notify(
  s: Handlers,
  run: Run,
  configure: Configure,
  type: HandlerEventType,
  error?: string,
): Promise<ErrorHandlerResult[]> {
  const event = eventOf(run, type, error);
  const handlers = handlersOf(s, configure, (id) => {
    s.handlerRuns.set(id, true);
    return () => s.handlerRuns.delete(id);
  });
  return Promise.all(handlers.map((h) => invokeAndRecord(s, h, run, event)));
}

/** One handler, independently of the others: whatever happens becomes a recorded result. */
async function invokeAndRecord(
  s: Handlers,
  h: Handler,
  run: Run,
  event: FailureEvent,
): Promise<ErrorHandlerResult> {
  const { logger } = s;
  // A bot or mail notification holds a socket for up to its timeout per attempt: each attempt
  // takes one of the node's slots (not the backoff between). A custom handler starts a run,
  // which the run queue's limits bound.
  const slotted: Handler =
    h.kind === "custom"
      ? h
      : { kind: h.kind, deliver: (ctx) => s.slots.run(run.scope, () => h.deliver(ctx)) };
  const r = await invoke(s, s.sleep, slotted, run, event).catch(
    (err: unknown): ErrorHandlerResult => ({
      kind: h.kind,
      ok: false,
      attempts: 0,
      error: String(err),
      at: s.clock.now(),
      event: event.event,
    }),
  );
  if (!r.ok) logger.warn({ runId: run.id, kind: r.kind, error: r.error }, "error handler failed");
  await s.store
    .addErrorHandlerResult(run.id, r)
    .catch((err: unknown) =>
      logger.error({ err, runId: run.id, result: r }, "could not record error handler result"),
    );
  return r;
}

function track(s: Handlers, p: Promise<unknown>): void {
  const q = p
    .catch((err: unknown) => s.logger.error({ err }, "error handlers failed"))
    .finally(() => s.inFlight.delete(q));
  s.inFlight.add(q);
}

/** `facts` absent: ended by recovery, which knows neither the kind nor the configuration. */
function ended(
  s: Handlers,
  runId: string,
  end: RunEnd,
  facts: RunFacts | undefined,
  given?: Configure,
): void {
  const byHandler = s.handlerRuns.delete(runId);
  if (end.status !== "FAILURE" || byHandler) return;
  // An executed run without a configuration never reached its release: no handlers known.
  if (facts && (facts.elementType !== "DPL" || !given || !hasHandlers(given))) return;
  track(
    s,
    (async () => {
      const run = await s.store.getRun(null, runId);
      if (run?.elementType !== "DPL") return;
      const configure = given ?? (await configureOf(s.store, run));
      if (!configure || !hasHandlers(configure) || (await startedByHandler(s.store, run))) return;
      await notify(s, run, configure, "run.failure");
    })(),
  );
}

/**
 * A run a custom handler started, known from the store when no mark of it is held here (it
 * executed on another node, or this process restarted): it has a parent but no initiator, its
 * parameter is a handler's event about that parent, and its parent had already ended when it was
 * created. A sub-flow's child is created while its parent runs; a run started through the API
 * with a `parentRunId` and no user (the header is optional there) has a parameter of its own.
 */
async function startedByHandler(store: Store, run: Run): Promise<boolean> {
  if (run.parentRunId === null || run.initiator !== null) return false;
  if (!isEventAbout(run.runParam, run.parentRunId)) return false;
  const parent = await store.getRun(null, run.parentRunId);
  return parent?.endTime != null && parent.endTime <= run.createTime;
}

/** Whether a run's parameter is the event a handler is given about run `id` (custom.ts). */
function isEventAbout(runParam: string | null, id: string): boolean {
  try {
    const p = JSON.parse(runParam ?? "null") as Partial<FailureEvent> | null;
    return p?.runId === id && (p.event === "run.failure" || p.event === "run.timeout");
  } catch {
    return false;
  }
}

function sentinel(s: Handlers, runId: string, configure: Configure, seconds: number): void {
  if (s.handlerRuns.has(runId) || !hasHandlers(configure)) return;
  track(
    s,
    (async () => {
      const run = await s.store.getRun(null, runId);
      if (!run || run.endTime !== null) return; // ended first: its own outcome is what matters
      if (await startedByHandler(s.store, run)) return;
      const error = t(s.config.language, "sentinel", { runId, seconds });
      await notify(s, run, configure, "run.timeout", error);
    })(),
  );
}

/** The handlers a flow's configuration names. */
function handlersOf(
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
async function invoke(
  deps: ErrorHandlerDeps,
  sleep: (ms: number) => Promise<void>,
  handler: Handler,
  run: Run,
  event: FailureEvent,
): Promise<ErrorHandlerResult> {
  const { clock, config } = deps;
  const ctx = { event, run, language: config.language };
  let attempts = 0;
  let lastError = "";
  let runId: string | undefined;
  while (attempts < config.attempts) {
    attempts++;
    try {
      const out = await handler.deliver(ctx);
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

const hasHandlers = (c: Configure): boolean =>
  Boolean(c.errorHandlers.email || c.errorHandlers.bot || c.errorHandlers.custom);

/** A flow run's configuration when the event does not carry it (recovery, shutdown). */
async function configureOf(store: Store, run: Run): Promise<Configure | undefined> {
  if (run.elementType !== "DPL" || run.version === null) return undefined;
  const rev = await store.flowRevision(run.elementId, Number(run.version));
  return rev ? normalizeConfigure(rev.configure) : undefined;
}
