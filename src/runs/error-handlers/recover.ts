import type { Clock, TimerHandle } from "../../clock.ts";
import type { NoticeStore, OwnerRule } from "../../store/kysely-notices.ts";
import type { ErrorHandlers } from "./index.ts";

/** Runs taken over whose notifications are under way on a node at once, at most. */
const BATCH = 100;

export interface OwedSweepConfig {
  /** This process owns the database (embedded): every other holder was a previous life of it. */
  takeAll: boolean;
  /** A holder silent this long is dead (HEARTBEAT_TIMEOUT_MS). */
  heartbeatTimeoutMs: number;
  /** Marks of runs ended longer ago are dropped, not sent (ERROR_HANDLER_RECOVER_HOURS). */
  windowMs: number;
  /**
   * How often a node looks (HEARTBEAT_MS): for its own marks it gave up and, unless it takes all
   * (then other holders' marks only at start), for those of dead holders; 0: only at start. A
   * pass that took all it had room for is followed as soon as room frees up, whatever this says.
   */
  everyMs: number;
}

export interface OwedSweep {
  /** One pass: takes over what dead holders owed and sends it; answers how many runs it took. */
  sweep(): Promise<number>;
  /**
   * One pass now (the start), the next as soon as room frees up while a pass takes a full batch,
   * else one every `everyMs`.
   */
  start(): Promise<void>;
  stop(): Promise<void>;
}

/**
 * A FAILURE's error-handler notifications owed by a process that died before recording their
 * outcomes (docs/error-handlers.md, "Durable"): at start and on a timer, a node takes over the
 * marks of holders that are gone and sends them through the handlers (their slots, their retries).
 */
export function createOwedSweep(deps: {
  notices: NoticeStore;
  handlers: Pick<ErrorHandlers, "resend" | "givenUp" | "forget">;
  clock: Clock;
  logger: { warn(obj: unknown, msg?: string): void; error(obj: unknown, msg?: string): void };
  nodeId: string;
  config: OwedSweepConfig;
}): OwedSweep {
  const { notices, handlers, clock, logger, nodeId, config } = deps;
  let timer: TimerHandle | undefined;
  let running: Promise<unknown> = Promise.resolve();
  let stopped = false;
  // The runs taken over here whose notifications are under way: at most BATCH at once. The
  // node's own notifications do not count, so a receiver that never answers does not stop a
  // busy node from taking over what a dead one owed.
  const underWay = new Set<Promise<void>>();

  /**
   * This node's own marks it gave up (the store failed while it sent them), sent again while it
   * still holds them; dropped unsent when too old. Not counted in the batch, as its own FAILUREs'.
   */
  async function retryOwn(since: number): Promise<void> {
    const ids = handlers.givenUp().slice(0, BATCH);
    if (ids.length === 0) return;
    const { due, old } = await notices.held(nodeId, ids, since);
    const held = new Set([...due, ...old]);
    for (const runId of ids) if (!held.has(runId)) handlers.forget(runId);
    for (const runId of old) {
      await notices.clear(runId, nodeId);
      handlers.forget(runId);
    }
    if (old.length > 0)
      logger.warn(
        { runs: old.length, runIds: old.slice(0, 20) },
        "error-handler notifications owed by runs ended before ERROR_HANDLER_RECOVER_HOURS were not sent",
      );
    // Tracked by the handlers, never sent twice at once on this node (index.ts, owe).
    for (const runId of due) void handlers.resend(runId, nodeId);
  }

  /**
   * One pass: the runs it took, and whether more may be owed (it took all it had room for).
   * `others`: whether it looks for dead holders' marks too, not only for its own given up.
   */
  async function pass(others: boolean): Promise<{ taken: number; more: boolean }> {
    const now = clock.now();
    const since = now - config.windowMs;
    await retryOwn(since);
    if (!others) return { taken: 0, more: false };
    const rule: OwnerRule = {
      nodeId,
      takeAll: config.takeAll,
      live: { now, timeoutMs: config.heartbeatTimeoutMs },
    };
    const dropped = await notices.dropBefore(rule, since);
    if (dropped.length > 0)
      logger.warn(
        { runs: dropped.length, runIds: dropped.slice(0, 20) },
        "error-handler notifications owed by runs ended before ERROR_HANDLER_RECOVER_HOURS were not sent",
      );
    const limit = BATCH - underWay.size;
    const taken = await notices.claim(rule, since, limit);
    // Each is tracked by the handlers (idle(), pending()); its failures are logged there.
    for (const runId of taken) {
      const p = handlers.resend(runId, nodeId).finally(() => underWay.delete(p));
      underWay.add(p);
    }
    return { taken: taken.length, more: limit <= 0 || taken.length === limit };
  }

  /** Resolves once half a batch has room: a backlog is read in passes of 50 at least, not of 1. */
  async function halfFree(): Promise<void> {
    while (underWay.size > BATCH / 2) await Promise.race(underWay);
  }

  /** A pass, then the next: as soon as room frees up while more may be owed, else on the timer. */
  function cycle(others: boolean): Promise<void> {
    const p = pass(others)
      .then(({ more }) => more)
      .catch((err: unknown) => {
        logger.error({ err }, "owed error-handler notifications sweep failed");
        return false;
      })
      .then(next);
    running = p;
    return p;
  }

  function next(more: boolean): void {
    if (stopped) return;
    if (more) {
      // Not awaited by stop(): the notifications under way have their own grace (main.ts).
      void halfFree().then(() => {
        if (!stopped) void cycle(true);
      });
      return;
    }
    if (config.everyMs <= 0) return;
    // Owning the database, no other holder appears after the start: only its own are looked at.
    timer = clock.setTimeout(() => void cycle(!config.takeAll), config.everyMs);
    timer.unref?.();
  }

  return {
    sweep: async () => (await pass(true)).taken,
    start: () => cycle(true),
    async stop() {
      stopped = true;
      if (timer) clock.clearTimeout(timer);
      await running;
    },
  };
}
