import type { Clock } from "../clock.ts";
import { ErrorCode, errorText, SluiceError } from "../errors.ts";
import { type NewRun, type Run, type RunEnd, type Store, TERMINAL } from "../store/types.ts";
import type {
  ExecRun,
  LifecycleDeps,
  RunExecutor,
  RunLifecycle,
  RunRequest,
  SyncRun,
  SyncWait,
} from "./lifecycle-types.ts";
import { type Execution, limitMessage, RunStop, toEnd } from "./outcome.ts";
import type { RunEvents } from "./run-events.ts";
import { waitForRunEnd } from "./wait.ts";
import {
  endedRun,
  insertStarted,
  type PendingRecord,
  recordEnd,
  SYNC_WRITE_BEHIND_MS,
} from "./write-behind.ts";

// The contract is named from here by its users; it is written in lifecycle-types.ts.
export type * from "./lifecycle-types.ts";

/** The state one lifecycle keeps: its dependencies, its executor and the runs it holds. */
interface Lifecycle<Req extends RunRequest> {
  deps: LifecycleDeps;
  store: Store;
  clock: Clock;
  events: RunEvents;
  limits: LifecycleDeps["limits"];
  executor: RunExecutor<Req>;
  /** Runs executing here, to stop them (terminate, timeout, limit). */
  active: Map<string, AbortController>;
  /** Runs this process queued and has not yet started: their record and parameter, in memory. */
  queuedHere: Map<string, { rec: NewRun; parameter: unknown }>;
}

/** create → (queue) → start → end, the same for every kind of run; `executor` does the work. */
export function createRunLifecycle<Req extends RunRequest>(
  deps: LifecycleDeps,
  executor: RunExecutor<Req>,
): RunLifecycle<Req> {
  const { store, clock, events, limits } = deps;
  const c: Lifecycle<Req> = {
    deps,
    store,
    clock,
    events,
    limits,
    executor,
    active: new Map(),
    queuedHere: new Map(),
  };
  // A run that ended elsewhere (terminated through another node) while it executes here.
  events.onEnd((runId) => c.active.get(runId)?.abort(new RunStop("terminate", "terminated")));
  return {
    start: (req, opts) => create(c, req, opts?.inProcess ?? false),
    runSync: (req, wait) => runSync(c, req, wait),
    execute: (runId) => execute(c, runId),
    waitForEnd: (scope, runId, timeoutS) =>
      waitForRunEnd(
        { store, events, clock },
        scope,
        runId,
        Math.min(timeoutS, limits.maxWaitS) * 1000,
      ),
    terminate: (run) => terminate(c, run),
  };
}

/** Executes under the system limit; never throws. */
async function executeLimited<Req extends RunRequest>(
  c: Lifecycle<Req>,
  rec: ExecRun,
  parameter: unknown,
): Promise<Execution & { end: RunEnd }> {
  const { clock, limits, executor, active } = c;
  const ctl = new AbortController();
  active.set(rec.id, ctl);
  const message = limitMessage(limits.maxRunS);
  let limitHit = false;
  const limit = clock.setTimeout(() => {
    limitHit = true;
    ctl.abort(new RunStop("limit", message));
  }, limits.maxRunS * 1000);
  let ex: Execution;
  try {
    ex = await executor.execute(rec, parameter, ctl.signal);
  } catch (err) {
    ex = {
      outcome: { status: "FAILURE", error: errorText(err) },
    };
  } finally {
    clock.clearTimeout(limit);
    active.delete(rec.id);
  }
  let end = toEnd(ex.outcome, clock.now(), limits.resultBytes);
  // The system limit ends the run FAILURE whatever the executor made of its stop.
  if (limitHit && end.status !== "SUCCESS")
    end = { ...end, status: "FAILURE", summary: message, error: message };
  return { ...ex, end };
}

/**
 * Executes a STARTED run to its end and records it; never throws. With `pending`, the run is not
 * in the store yet (run-sync within its write-behind grace), see write-behind.ts.
 */
async function run<Req extends RunRequest>(
  c: Lifecycle<Req>,
  rec: ExecRun,
  parameter: unknown,
  pending?: PendingRecord,
) {
  const { store, events, deps } = c;
  const { end, configure, afterEnd } = await executeLimited(c, rec, parameter);
  let recorded = false;
  try {
    recorded = await recordEnd(store, pending, rec.id, end);
  } catch (err) {
    // The store failed (its database went away): the run keeps its last recorded status. Not
    // thrown: an in-process run has nobody awaiting it, and an unhandled rejection ends the
    // process (docs/errors.md, "Bad input"). A run-sync still sees the failed insert it awaits.
    deps.logger.error({ err, runId: rec.id, status: end.status }, "could not record a run's end");
  }
  if (recorded) {
    if (pending?.wroteEnded) events.publish({ type: "created", run: rec });
    events.publish({ type: "ended", runId: rec.id, end, run: rec, configure });
  } else events.notify(rec.id);
  afterEnd?.();
  return { end, recorded };
}

async function create<Req extends RunRequest>(
  c: Lifecycle<Req>,
  req: Req,
  inProcess: boolean,
): Promise<string> {
  const { store, events, limits, deps, executor } = c;
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
    if (!started && deps.queue.depth() >= limits.queuedRuns)
      throw new SluiceError(ErrorCode.TOO_MANY, [`queue holds ${limits.queuedRuns} runs`]);
    if (started) {
      await store.insertRun(rec);
      events.publish({ type: "created", run: rec });
      if (slot) slot.run(() => run(c, rec, parameter));
      else void run(c, rec, parameter);
      return rec.id;
    }
    await commitQueued(c, rec, parameter);
    return rec.id;
  } catch (err) {
    slot?.release();
    throw err;
  }
}

/** The record of a run that was prepared to start at once but has to wait for its turn. */
function asQueued(rec: NewRun): NewRun {
  return { ...rec, status: "QUEUED", nodeId: null, startTime: null };
}

/** Commits a QUEUED run with its job and tells the subscribers. */
async function commitQueued<Req extends RunRequest>(
  c: Lifecycle<Req>,
  rec: NewRun,
  parameter: unknown,
): Promise<void> {
  const { deps, queuedHere, events, executor } = c;
  // Only a queue that runs its jobs here guarantees this process takes the job (else the map would leak).
  if (deps.queueIsLocal) queuedHere.set(rec.id, { rec, parameter });
  try {
    await deps.commitQueued(rec, { runId: rec.id, kind: executor.kind, scope: rec.scope });
  } catch (err) {
    queuedHere.delete(rec.id);
    throw err;
  }
  events.publish({ type: "created", run: rec });
}

async function runSync<Req extends RunRequest>(
  c: Lifecycle<Req>,
  req: Req,
  wait: SyncWait,
): Promise<SyncRun> {
  const { store, clock, events, limits, executor, active } = c;
  executor.admit?.();
  const rec = await executor.prepare(req, "STARTED", true);
  if (rec.runLimit != null) return runSyncLimited(c, asQueued(rec), req.parameter, wait);
  const pending: PendingRecord = { rec, inserted: null, wroteEnded: false };
  const grace = clock.setTimeout(() => {
    insertStarted(store, pending);
    pending.inserted?.then(
      () => events.publish({ type: "created", run: rec }),
      () => {},
    );
  }, SYNC_WRITE_BEHIND_MS);
  const done = run(c, rec, req.parameter, pending);
  // One rule for flows and tasks: absent or 0 waits until the end, and every wait is bounded by
  // MAX_WAIT_S (docs/architecture.md, "Run-sync").
  const waitS =
    wait.timeoutS && wait.timeoutS > 0 ? Math.min(wait.timeoutS, limits.maxWaitS) : limits.maxWaitS;
  let timer: ReturnType<Clock["setTimeout"]> | undefined;
  const elapsed = new Promise<null>((resolve) => {
    timer = clock.setTimeout(() => resolve(null), waitS * 1000);
  });
  const outcome = await Promise.race([done, elapsed]);
  clock.clearTimeout(grace);
  if (timer) clock.clearTimeout(timer);
  if (outcome?.recorded) return { run: endedRun(rec, outcome.end), killedOnTimeout: false };
  // The wait elapsed (the run goes on, or is stopped below), or a terminate won.
  if (pending.inserted) await pending.inserted;
  else {
    pending.inserted = store.insertRun(rec);
    await pending.inserted;
    events.publish({ type: "created", run: rec });
  }
  const now = await readBack(c, rec);
  if (TERMINAL.has(now.status) || !wait.terminateOnTimeout)
    return { run: now, killedOnTimeout: false };
  active.get(rec.id)?.abort(new RunStop("timeout", "the wait elapsed"));
  await done;
  // The answer carries the status the stop ended in, not STARTED.
  return { run: await readBack(c, rec), killedOnTimeout: true };
}

/**
 * A run-sync of a limited element waits for its turn like any queued run, within its timeout
 * (docs/run-limits.md): committed QUEUED with its job, then awaited. `terminateOnTimeout` cancels
 * it when the wait elapses, whether it still waits or already executes.
 */
async function runSyncLimited<Req extends RunRequest>(
  c: Lifecycle<Req>,
  rec: NewRun,
  parameter: unknown,
  wait: SyncWait,
): Promise<SyncRun> {
  const { deps, limits, store, events } = c;
  if (deps.queue.depth() >= limits.queuedRuns)
    throw new SluiceError(ErrorCode.TOO_MANY, [`queue holds ${limits.queuedRuns} runs`]);
  await commitQueued(c, rec, parameter);
  const waitS =
    wait.timeoutS && wait.timeoutS > 0 ? Math.min(wait.timeoutS, limits.maxWaitS) : limits.maxWaitS;
  const ran = await waitForRunEnd(
    { store, events, clock: c.clock },
    rec.scope,
    rec.id,
    waitS * 1000,
  );
  const now = ran ?? (await readBack(c, rec));
  if (TERMINAL.has(now.status) || !wait.terminateOnTimeout)
    return { run: now, killedOnTimeout: false };
  await terminate(c, now);
  return { run: await readBack(c, rec), killedOnTimeout: true };
}

async function readBack<Req extends RunRequest>(c: Lifecycle<Req>, rec: NewRun): Promise<Run> {
  const { store, deps } = c;
  const r = await store.getRun(rec.scope, rec.id);
  if (!r) throw new SluiceError(deps.notFound, [rec.id]);
  return r;
}

async function execute<Req extends RunRequest>(c: Lifecycle<Req>, runId: string): Promise<void> {
  const { store, clock, events, deps, queuedHere } = c;
  // startRun moves only a QUEUED run and answers it as started, so a run terminated while it
  // waited is not executed and a worker needs no read of its own (docs/cluster.md).
  const mine = queuedHere.get(runId);
  const startTime = clock.now();
  // A limited run is not started by startRun; its claim counts its element (docs/run-limits.md).
  const r =
    (await store.startRun(runId, startTime, deps.nodeId)) ??
    (await store.claimLimited(runId, startTime, deps.nodeId));
  // Not started: ended meanwhile, or a limited run without a free slot, whose job comes again
  // when a run of its element ends (its record stays here until then; a terminate drops it).
  if (!r) return;
  queuedHere.delete(runId);
  events.publish({ type: "started", runId, startTime });
  const rec = { ...(mine?.rec ?? r), startTime, nodeId: deps.nodeId };
  await run(c, rec, mine ? mine.parameter : JSON.parse(r.runParam ?? "null"));
}

async function terminate<Req extends RunRequest>(c: Lifecycle<Req>, r: Run): Promise<boolean> {
  const { store, clock, events, active } = c;
  if (TERMINAL.has(r.status)) return false;
  const end: RunEnd = {
    status: "CANCELED",
    endTime: clock.now(),
    summary: "terminated",
    error: "terminated by request",
  };
  if (!(await store.endRun(r.id, end))) return false;
  // A run that waited for a slot has no job that would drop its queued record.
  c.queuedHere.delete(r.id);
  active.get(r.id)?.abort(new RunStop("terminate", "terminated"));
  events.publish({ type: "ended", runId: r.id, end, run: r });
  for (const child of await store.childRuns(r.id)) await terminate(c, child);
  return true;
}
