import type { Logger } from "pino";
import type { Clock, TimerHandle } from "../clock.ts";
import type { StartedAfter, Store } from "../store/types.ts";
import { lostEnd } from "./recovery.ts";
import type { RunEvents } from "./run-events.ts";

/**
 * Runs STARTED here that nothing executes (docs/cluster.md): a run this node recorded STARTED
 * whose execution is not in this process. Its insert committed but the answer was lost (the
 * connection dropped at COMMIT), so its start was refused to its caller; or its end could not be
 * written (the database failed). The node is alive, so the heartbeat rule (recovery.ts) never
 * fails it. Every node looks for its own such runs on the clock and ends them FAILURE, through
 * the end every failure takes (waiters wake, error handlers and webhooks are called).
 */

/**
 * The runs this process holds STARTED, shared by every lifecycle of the process: a run is held
 * from before the write that makes it STARTED here (its insert, its start) until its end was
 * written or that write failed. A run executing here, or about to be recorded STARTED here, is
 * always held.
 */
export interface RunsHere {
  /** Holds the run until the answer is called (once; more calls do nothing). */
  hold(runId: string): () => void;
  has(runId: string): boolean;
  /** The runs held now. */
  ids(): string[];
}

/**
 * Counted per run ID: a second start of an ID (derived from its purpose, docs/error-handlers.md)
 * that is refused as taken does not release the first's hold.
 */
export function createRunsHere(): RunsHere {
  const held = new Map<string, number>();
  return {
    hold(runId) {
      held.set(runId, (held.get(runId) ?? 0) + 1);
      let released = false;
      return () => {
        if (released) return;
        released = true;
        const n = (held.get(runId) ?? 1) - 1;
        if (n > 0) held.set(runId, n);
        else held.delete(runId);
      };
    },
    has: (runId) => held.has(runId),
    ids: () => [...held.keys()],
  };
}

export interface OrphanSweep {
  /** One sweep: the number of runs it ended. The timer calls it, tests may too. */
  sweep(): Promise<number>;
  start(): void;
  stop(): Promise<void>;
}

/** Runs read per page, and orphans ended per sweep at most; the next sweep takes the rest. */
const BATCH = 500;

interface OrphanDeps {
  store: Pick<Store, "startedOn" | "endStartedOn">;
  events: RunEvents;
  clock: Clock;
  logger: Logger;
  nodeId: string;
  here: RunsHere;
  /**
   * ORPHAN_SWEEP_MS: how often the node looks; and how old a start must be to be looked at (a
   * start younger than that is left for the next sweep, whatever it is).
   */
  everyMs: number;
  /** Runs read per page (and ended per sweep at most); BATCH unless a test says less. */
  batch?: number;
}

export function createOrphanSweep(deps: OrphanDeps): OrphanSweep {
  const state = {
    timer: undefined as TimerHandle | undefined,
    running: Promise.resolve() as Promise<unknown>,
    stopped: false,
  };
  const schedule = (): void => {
    if (state.stopped) return;
    state.timer = deps.clock.setTimeout(() => {
      state.running = sweep(deps)
        .catch((err: unknown) => deps.logger.error({ err }, "sweep of runs lost here failed"))
        .finally(schedule);
    }, deps.everyMs);
    state.timer.unref?.();
  };
  return {
    sweep: () => sweep(deps),
    start: schedule,
    async stop() {
      state.stopped = true;
      if (state.timer) deps.clock.clearTimeout(state.timer);
      await state.running;
    },
  };
}

async function sweep(deps: OrphanDeps): Promise<number> {
  const { store, events, clock, nodeId, here } = deps;
  const batch = deps.batch ?? BATCH;
  const cutoff = clock.now() - deps.everyMs;
  let failed = 0;
  let after: StartedAfter | undefined;
  // Page by page: the runs executing here (held) may be more than a page, older than an orphan.
  while (failed < batch) {
    const page = await store.startedOn(nodeId, cutoff, batch, after);
    for (const run of page) {
      after = { createTime: run.createTime, id: run.id };
      // Held here: executing, its insert or its end being written. A run not held here is held
      // by nothing: no start makes a STARTED run STARTED again, and its ID is taken for an insert.
      if (failed >= batch || here.has(run.id)) continue;
      const message = `node ${nodeId} is not executing this run: its start or its end was not confirmed by the database; the run was lost`;
      const end = lostEnd(run, message, clock.now(), nodeId);
      // Only while it is still STARTED by this node: an end recorded meanwhile wins.
      if (!(await store.endStartedOn(run.id, nodeId, end))) continue;
      // Published like any other end: waiters wake, metrics count it, error handlers are called.
      events.publish({ type: "ended", runId: run.id, end });
      failed++;
    }
    if (page.length < batch) break;
  }
  if (failed > 0) deps.logger.warn({ failed }, "failed runs STARTED here that nothing executed");
  return failed;
}
