/**
 * Error handlers (docs/flow-graph.md): on a run's FAILURE, and once when a sentinel timeout passes, every
 * configured handler is invoked independently, retried with backoff, and its outcome recorded on
 * the run. Nothing here can change or lose the run: every failure becomes a recorded result.
 */
import { LRUCache } from "lru-cache";
import { sleep } from "../../clock.ts";
import type { Configure } from "../../flows/graph.ts";
import type { ErrorHandlerResult, Run, RunEnd } from "../../store/types.ts";
import { createTurnSlots, type TurnSlots } from "../../turn-slots.ts";
import type { RunEvent, RunFacts } from "../run-events.ts";
import { handlersOf, invoke } from "./invoke.ts";
import { configureOf, startedByHandler } from "./lookups.ts";
import { t } from "./messages.ts";
import { hasHandlers } from "./owed.ts";
import type { ErrorHandlerDeps, FailureEvent, Handler, HandlerEventType } from "./types.ts";

export type { ErrorHandlerConfig, ErrorHandlerDeps } from "./types.ts";

/** Notifications of one app waiting for a slot at most; past it one is recorded as not sent. */
const WAITING_PER_APP = 1000;
/** Marks given up kept for the sweep at most; past it one waits for the node to be gone. */
const GIVEN_UP_MAX = 10_000;

export interface ErrorHandlers {
  /** Invokes every configured handler for the event; resolves with the recorded outcomes. */
  notify(
    run: Run,
    configure: Configure,
    event: HandlerEventType,
    error?: string,
  ): Promise<ErrorHandlerResult[]>;
  /**
   * Sends a FAILURE's owed notifications this node has taken over (`holder`: its mark), but for
   * the handlers whose outcome is recorded already, then clears the mark. Resolves once done.
   */
  resend(runId: string, holder: string): Promise<void>;
  /**
   * This node's marks whose sending ended without clearing them (the store failed): the owed
   * sweep sends them again (recover.ts). A mark is never sent twice at once on a node: `resend`
   * of one under way joins it.
   */
  givenUp(): string[];
  /** No longer given up here: cleared, too old, or taken over by another node. */
  forget(runId: string): void;
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
  /** FAILUREs whose marked notifications are under way here (owe), by run ID. */
  sending: Map<string, Promise<void>>;
  /** This node's marks whose sending ended without clearing them, oldest first. */
  givenUp: Set<string>;
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
    sending: new Map(),
    givenUp: new Set(),
  };
  deps.events.subscribe((e: RunEvent) => {
    if (e.type === "ended") ended(s, e.runId, e.end, e.run, e.configure);
    else if (e.type === "sentinel") sentinel(s, e.runId, e.configure, e.seconds);
  });
  return {
    notify: (run, configure, event, error) => notify(s, run, configure, event, error),
    resend: (runId, holder) => owe(s, runId, holder, () => resend(s, runId)),
    givenUp: () => [...s.givenUp],
    forget: (runId) => void s.givenUp.delete(runId),
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
  /** Kinds whose outcome is recorded already (a notification taken over after a crash). */
  done: ReadonlySet<string> = new Set(),
): Promise<ErrorHandlerResult[]> {
  const event = eventOf(run, type, error);
  const handlers = handlersOf(s, configure, (id) => {
    s.handlerRuns.set(id, true);
    return () => s.handlerRuns.delete(id);
  }).filter((h) => !done.has(h.kind));
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

function track(s: Handlers, p: Promise<unknown>): Promise<void> {
  const q = p
    .then(() => undefined)
    .catch((err: unknown) => s.logger.error({ err }, "error handlers failed"))
    .finally(() => s.inFlight.delete(q));
  s.inFlight.add(q);
  return q;
}

/**
 * Sends a FAILURE's marked notifications (`work`), then clears the mark (docs/error-handlers.md,
 * "Durable"); one at a time per run on this node: a call while one is under way joins it. When
 * the store fails (reading the run or its release, or clearing), the mark stays and is given up:
 * the owed sweep sends it again (recover.ts), or whoever takes it over once this node is gone.
 */
function owe(s: Handlers, runId: string, holder: string, work: () => Promise<void>): Promise<void> {
  const under = s.sending.get(runId);
  if (under) return under;
  s.givenUp.delete(runId);
  const p = track(
    s,
    (async () => {
      try {
        await work();
        await s.notices?.clear(runId, holder);
      } catch (err) {
        if (s.givenUp.size < GIVEN_UP_MAX) s.givenUp.add(runId);
        throw err;
      } finally {
        s.sending.delete(runId);
      }
    })(),
  );
  s.sending.set(runId, p);
  return p;
}

/**
 * `facts` absent: ended by recovery, which knows neither the kind nor the configuration. An end
 * that owes notifications carries its mark's holder (`end.notifyBy`): cleared once they are
 * recorded, or at once when the run owes none after all (a handler's run, a release without
 * handlers). An end without a mark costs nothing here.
 */
function ended(
  s: Handlers,
  runId: string,
  end: RunEnd,
  facts: RunFacts | undefined,
  given?: Configure,
): void {
  const byHandler = s.handlerRuns.delete(runId);
  const holder = end.notifyBy;
  if (end.status !== "FAILURE") return;
  // An executed run without a configuration never reached its release: no handlers known.
  if (byHandler || (facts && (facts.elementType !== "DPL" || !given || !hasHandlers(given)))) {
    if (holder) void owe(s, runId, holder, async () => {});
    return;
  }
  const work = async () => {
    const run = await s.store.getRun(null, runId);
    const configure =
      run?.elementType === "DPL" ? (given ?? (await configureOf(s.store, run))) : undefined;
    if (run && configure && hasHandlers(configure) && !(await startedByHandler(s.store, run)))
      await notify(s, run, configure, "run.failure");
  };
  if (holder) void owe(s, runId, holder, work);
  else track(s, work());
}

/** A mark taken over, or given up here (recover.ts): what was recorded is not sent again. */
async function resend(s: Handlers, runId: string): Promise<void> {
  const run = await s.store.getRun(null, runId);
  const configure = run?.status === "FAILURE" ? await configureOf(s.store, run) : undefined;
  if (run && configure && hasHandlers(configure) && !(await startedByHandler(s.store, run))) {
    const recorded = await s.store.errorHandlerResults(runId);
    const done = new Set(recorded.filter((r) => r.event === "run.failure").map((r) => r.kind));
    await notify(s, run, configure, "run.failure", undefined, done);
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
