import { LRUCache } from "lru-cache";
import type { Run } from "../store/types.ts";
import { RunIdTaken } from "../store/unique-violation.ts";
import {
  asQueued,
  checkBound,
  checkStored,
  commitQueued,
  holdParameter,
  type Lifecycle,
  run,
  terminate,
} from "./lifecycle-core.ts";
import { runSync } from "./lifecycle-sync.ts";
import type { LifecycleDeps, RunExecutor, RunLifecycle, RunRequest } from "./lifecycle-types.ts";
import { RunStop } from "./outcome.ts";
import { createQueuedHere } from "./queued-here.ts";
import { waitForRunEnd } from "./wait.ts";

// The contract is named from here by its users; it is written in lifecycle-types.ts.
export type * from "./lifecycle-types.ts";

/** create → (queue) → start → end, the same for every kind of run; `executor` does the work. */
export function createRunLifecycle<Req extends RunRequest>(
  deps: LifecycleDeps,
  executor: RunExecutor<Req>,
): RunLifecycle<Req> {
  const { store, clock, events, limits } = deps;
  const endedEarly = new LRUCache<string, true>({ max: 10_000 });
  const c: Lifecycle<Req> = {
    deps,
    store,
    clock,
    events,
    limits,
    executor,
    active: new Map(),
    queuedHere: createQueuedHere(),
    endedEarly,
    holds: new Map(),
    inserting: new Map(),
  };
  // A run that ended elsewhere (terminated through another node) while it executes here; or
  // before it does: terminated while its start was being committed, it stops as soon as it runs.
  events.onEnd((runId) => {
    // A queued run that ended before it started (terminated, through this lifecycle or another)
    // gives back its place among the runs kept in memory.
    c.queuedHere.delete(runId);
    const ctl = c.active.get(runId);
    if (ctl) ctl.abort(new RunStop("terminate", "terminated"));
    else endedEarly.set(runId, true);
  });
  return {
    start: (req, opts) => create(c, req, opts?.inProcess ?? false),
    runSync: (req, wait) => runSync(c, req, wait),
    execute: (runId) => execute(c, runId),
    waitForEnd: (scope, runId, timeoutS, gone) =>
      waitForRunEnd(
        { store, events, clock },
        scope,
        runId,
        Math.min(timeoutS, limits.maxWaitS) * 1000,
        gone,
      ),
    terminate: (run) => terminate(c, run),
  };
}

async function create<Req extends RunRequest>(
  c: Lifecycle<Req>,
  req: Req,
  inProcess: boolean,
): Promise<string> {
  const { store, events, deps, executor } = c;
  executor.admit?.();
  // A run that would not wait (a free slot, nobody queued) is committed STARTED and executed at
  // once: one write fewer than QUEUED → STARTED. Only a queue that runs jobs here offers slots.
  let slot = inProcess ? null : (deps.queue.reserve?.(executor.kind) ?? null);
  try {
    let rec = await executor.prepare(req, inProcess || slot ? "STARTED" : "QUEUED", inProcess);
    // A limited run starts only through its claim, which counts its element (docs/run-limits.md).
    if (rec.runLimit != null && rec.status === "STARTED") {
      slot?.release();
      slot = null;
      rec = asQueued(rec);
    }
    const started = rec.status === "STARTED";
    const { parameter } = req;
    await checkStored(c, rec);
    if (!started) await checkBound(c, rec);
    if (started) {
      // A run of this ID starting or executing here (a derived ID, docs/error-handlers.md): the
      // second start is refused as the store refuses a taken ID, once the first's insert is
      // answered (the run is then readable), and the hold stays the first's. No await between
      // this look and the insert's entry below: two starts cannot both pass it.
      const first = c.inserting.get(rec.id) ?? (c.holds.has(rec.id) ? Promise.resolve() : null);
      if (first) {
        await first.catch(() => {});
        throw new RunIdTaken(rec.id);
      }
      // Refused (429) before anything is stored when its parameter does not fit (run-memory.ts).
      holdParameter(c, rec);
      // Held here before its row can be STARTED: the orphan sweep leaves it (orphans.ts). A
      // failed insert may still have committed (its answer lost): then the sweep ends it.
      const release = deps.here.hold(rec.id);
      const insert = store.insertRun(rec);
      c.inserting.set(rec.id, insert);
      await insert
        .catch((err: unknown) => {
          c.holds.get(rec.id)?.free();
          c.holds.delete(rec.id);
          release();
          throw err;
        })
        .finally(() => c.inserting.delete(rec.id));
      events.publish({ type: "created", run: rec });
      if (slot) slot.run(() => run(c, rec, parameter, release));
      else void run(c, rec, parameter, release);
      return rec.id;
    }
    await commitQueued(c, rec, parameter);
    return rec.id;
  } catch (err) {
    slot?.release();
    throw err;
  }
}

async function execute<Req extends RunRequest>(c: Lifecycle<Req>, runId: string): Promise<void> {
  const { clock, events, deps, queuedHere } = c;
  // startRun moves only a QUEUED run and answers it as started, so a run terminated while it
  // waited is not executed and a worker needs no read of its own (docs/cluster.md).
  const mine = queuedHere.get(runId);
  const startTime = clock.now();
  // Held before the start's write; released when the run was not started (orphans.ts).
  const release = deps.here.hold(runId);
  const r = await startHere(c, runId, startTime).catch((err: unknown) => {
    release();
    throw err;
  });
  // Not started: ended meanwhile, or a limited run without a free slot, whose job comes again
  // when a run of its element ends (its record stays here until then; a terminate drops it).
  if (!r) return release();
  queuedHere.delete(runId);
  events.publish({ type: "started", runId, startTime });
  const rec = { ...(mine?.rec ?? r), startTime, nodeId: deps.nodeId };
  // A parameter that does not fit what runs may hold is not parsed: the run ends FAILURE.
  let parameter: unknown;
  try {
    holdParameter(c, rec);
    parameter = mine ? mine.parameter : JSON.parse(r.runParam ?? "null");
  } catch (refused) {
    await run(c, rec, null, release, { refused });
    return;
  }
  await run(c, rec, parameter, release);
}

/** QUEUED → STARTED by this node; a limited run by its claim, which counts its element. */
async function startHere<Req extends RunRequest>(
  c: Lifecycle<Req>,
  runId: string,
  startTime: number,
): Promise<Run | undefined> {
  const { store, deps } = c;
  return (
    (await store.startRun(runId, startTime, deps.nodeId)) ??
    (await store.claimLimited(runId, startTime, deps.nodeId))
  );
}
