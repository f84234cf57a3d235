import type { Clock, TimerHandle } from "../../clock.ts";
import type { NoticeStore, OwnerRule } from "../../store/kysely-notices.ts";
import type { ErrorHandlers } from "./index.ts";

/** Owed notifications taken over per sweep at most, less those under way here. */
const BATCH = 100;

export interface OwedSweepConfig {
  /** This process owns the database (embedded): every other holder was a previous life of it. */
  takeAll: boolean;
  /** A holder silent this long is dead (HEARTBEAT_TIMEOUT_MS). */
  heartbeatTimeoutMs: number;
  /** Marks of runs ended longer ago are dropped, not sent (ERROR_HANDLER_RECOVER_HOURS). */
  windowMs: number;
  /** How often a node looks (HEARTBEAT_MS); 0: only at start. */
  everyMs: number;
}

export interface OwedSweep {
  /** Takes over what dead holders owed and sends it; answers how many runs it took. */
  sweep(): Promise<number>;
  /** One sweep now (the start), then one every `everyMs`. */
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
  handlers: Pick<ErrorHandlers, "resend" | "pending">;
  clock: Clock;
  logger: { warn(obj: unknown, msg?: string): void; error(obj: unknown, msg?: string): void };
  nodeId: string;
  config: OwedSweepConfig;
}): OwedSweep {
  const { notices, handlers, clock, logger, nodeId, config } = deps;
  let timer: TimerHandle | undefined;
  let running: Promise<unknown> = Promise.resolve();
  let stopped = false;

  async function sweep(): Promise<number> {
    const now = clock.now();
    const rule: OwnerRule = {
      nodeId,
      takeAll: config.takeAll,
      liveSince: now - config.heartbeatTimeoutMs,
    };
    const since = now - config.windowMs;
    const dropped = await notices.dropBefore(rule, since);
    if (dropped.length > 0)
      logger.warn(
        { runs: dropped.length, runIds: dropped.slice(0, 20) },
        "error-handler notifications owed by runs ended before ERROR_HANDLER_RECOVER_HOURS were not sent",
      );
    const taken = await notices.claim(rule, since, BATCH - handlers.pending());
    // Each is tracked by the handlers (idle(), pending()); its failures are logged there.
    for (const runId of taken) void handlers.resend(runId, nodeId);
    return taken.length;
  }

  function schedule(): void {
    if (stopped || config.everyMs <= 0) return;
    timer = clock.setTimeout(() => {
      running = sweep()
        .catch((err: unknown) =>
          logger.error({ err }, "owed error-handler notifications sweep failed"),
        )
        .finally(schedule);
    }, config.everyMs);
    timer.unref?.();
  }

  return {
    sweep,
    async start() {
      await sweep().catch((err: unknown) =>
        logger.error({ err }, "owed error-handler notifications sweep failed"),
      );
      schedule();
    },
    async stop() {
      stopped = true;
      if (timer) clock.clearTimeout(timer);
      await running;
    },
  };
}
