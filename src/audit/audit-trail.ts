import type { Clock, TimerHandle } from "../clock.ts";
import { newId } from "../ids.ts";
import { createBatcher } from "../store/batch.ts";
import type { Scope } from "../store/types.ts";
import type { AuditEntry, AuditFilter, AuditPage, AuditStore } from "./types.ts";

const DAY_MS = 86_400_000;
/** Entries per insert statement, and per purge statement. */
const MAX_BATCH = 500;
const PURGE_BATCH = 1000;

export interface AuditConfig {
  /** AUDIT_RETENTION_DAYS: entries older than this are purged; 0 keeps them for good. */
  retentionDays: number;
  /** AUDIT_PURGE_MS: the purge period; 0 disables the timer (purge() still works). */
  purgeMs: number;
}

export interface AuditTrail {
  /**
   * Records one entry. Entries recorded in one turn of the event loop share one INSERT
   * (src/store/batch.ts). Never rejects: a failed write is logged, the change itself stands.
   */
  record(entry: Omit<AuditEntry, "id">): Promise<void>;
  list(
    scope: Scope | null,
    filter: AuditFilter,
    window: { limit: number; offset: number },
  ): Promise<AuditPage>;
  /** One purge pass, in batches; answers how many entries went. */
  purge(): Promise<number>;
  start(): void;
  stop(): Promise<void>;
}

export function createAuditTrail(deps: {
  store: AuditStore;
  clock: Clock;
  logger: { error(obj: unknown, msg?: string): void };
  config: AuditConfig;
}): AuditTrail {
  const { store, clock, logger, config } = deps;
  const insert = createBatcher<AuditEntry, void>({
    max: MAX_BATCH,
    run: async (entries) => {
      await store.insert(entries);
      return entries.map(() => undefined);
    },
  });
  let timer: TimerHandle | undefined;
  let running: Promise<unknown> = Promise.resolve();
  let stopped = false;

  async function purge(): Promise<number> {
    if (config.retentionDays <= 0) return 0;
    const before = clock.now() - config.retentionDays * DAY_MS;
    let total = 0;
    for (;;) {
      const n = await store.purgeBefore(before, PURGE_BATCH);
      total += n;
      if (n < PURGE_BATCH || stopped) return total;
      // Between batches the event loop serves requests; each batch is its own short statement.
      await new Promise((resolve) => setImmediate(resolve));
    }
  }

  function schedule(delay: number): void {
    if (stopped || config.purgeMs <= 0) return;
    timer = clock.setTimeout(() => {
      running = purge()
        .catch((err: unknown) => logger.error({ err }, "audit purge failed"))
        .finally(() => schedule(config.purgeMs));
    }, delay);
    timer.unref?.();
  }

  return {
    record: (entry) =>
      insert({ ...entry, id: newId(entry.at) }).catch((err: unknown) =>
        logger.error({ err, action: entry.action }, "an audit entry could not be written"),
      ),
    list: (scope, filter, window) => store.list(scope, filter, window),
    purge,
    start: () => schedule(Math.min(config.purgeMs, 10_000)),
    async stop() {
      stopped = true;
      if (timer) clock.clearTimeout(timer);
      await running;
    },
  };
}
