import type { Clock } from "../clock.ts";
import { errorText, SluiceError } from "../errors.ts";
import { newRunBytes } from "../store/stored-bytes.ts";
import { type NewRun, type Run, type RunEnd, type Store, TERMINAL } from "../store/types.ts";
import { owedEnd } from "./error-handlers/owed.ts";
import type { ExecRun, LifecycleDeps, RunExecutor, RunRequest } from "./lifecycle-types.ts";
import { type Execution, limitMessage, RunStop, toEnd } from "./outcome.ts";
import type { QueuedHere } from "./queued-here.ts";
import type { RunEvents } from "./run-events.ts";
import type { RunHold } from "./run-memory.ts";
import { type PendingRecord, recordEnd } from "./write-behind.ts";

// The parts of the run lifecycle (lifecycle.ts) that starting, run-sync (lifecycle-sync.ts) and
// the queue's worker side share.

/** The state one lifecycle keeps: its dependencies, its executor and the runs it holds. */
export interface Lifecycle<Req extends RunRequest> {
  deps: LifecycleDeps;
  store: Store;
  clock: Clock;
  events: RunEvents;
  limits: LifecycleDeps["limits"];
  executor: RunExecutor<Req>;
  /** Runs executing here, to stop them (terminate, timeout, limit). */
  active: Map<string, AbortController>;
  /** Runs this process queued and has not yet started: their record and parameter, in memory. */
  queuedHere: QueuedHere;
  /** Runs whose end was heard while none executed here (lifecycle.ts): stopped once they do. */
  endedEarly: { has(runId: string): boolean };
  /** What runs starting or executing here hold in memory (run-memory.ts), until they end. */
  holds: Map<string, RunHold>;
  /** Inserts of STARTED runs under way here, by run ID: a second start of one waits for it. */
  inserting: Map<string, Promise<void>>;
}

/**
 * Reserves a run's parameter (its JSON size) before it executes, or throws the 429 naming
 * LIMIT_RUN_BYTES_IN_FLIGHT[_PER_APP] (docs/run-limits.md, "Values in memory").
 */
export function holdParameter<Req extends RunRequest>(c: Lifecycle<Req>, rec: ExecRun): void {
  if (c.holds.has(rec.id)) return;
  const hold = c.deps.memory.hold(rec.scope);
  hold.take(rec.runParam?.length ?? 0);
  c.holds.set(rec.id, hold);
}

function dropHold<Req extends RunRequest>(c: Lifecycle<Req>, runId: string): void {
  c.holds.get(runId)?.free();
  c.holds.delete(runId);
}

/** Executes under the system limit; never throws. */
async function executeLimited<Req extends RunRequest>(
  c: Lifecycle<Req>,
  rec: ExecRun,
  parameter: unknown,
  refused: unknown,
): Promise<Execution & { end: RunEnd }> {
  const { clock, limits, executor, active } = c;
  const ctl = new AbortController();
  active.set(rec.id, ctl);
  if (c.endedEarly.has(rec.id)) ctl.abort(new RunStop("terminate", "terminated"));
  const message = limitMessage(limits.maxRunS);
  let limitHit = false;
  const limit = clock.setTimeout(() => {
    limitHit = true;
    ctl.abort(new RunStop("limit", message));
  }, limits.maxRunS * 1000);
  let ex: Execution;
  try {
    // A run whose parameter did not fit what runs may hold executes nothing (holdParameter).
    if (refused !== undefined) throw refused;
    ex = await executor.execute(rec, parameter, ctl.signal);
  } catch (err) {
    ex = {
      outcome: { status: "FAILURE", error: errorText(err) },
    };
  } finally {
    clock.clearTimeout(limit);
    active.delete(rec.id);
    dropHold(c, rec.id);
  }
  let end = toEnd(ex.outcome, clock.now(), limits.resultBytes);
  // The system limit ends the run FAILURE whatever the executor made of its stop.
  if (limitHit && end.status !== "SUCCESS")
    end = { ...end, status: "FAILURE", summary: message, error: message };
  return { ...ex, end };
}

/**
 * Executes a STARTED run to its end and records it; never throws. With `pending`, the run is not
 * in the store yet (run-sync within its write-behind grace), see write-behind.ts. With `refused`,
 * the run ends FAILURE with that error and executes nothing. `release` lets go of the run's hold
 * among the runs held here (orphans.ts) once its end was written, or that write failed.
 */
export async function run<Req extends RunRequest>(
  c: Lifecycle<Req>,
  rec: ExecRun,
  parameter: unknown,
  release: () => void,
  opts: { pending?: PendingRecord; refused?: unknown } = {},
) {
  const { store, events, deps } = c;
  const { pending } = opts;
  const ex = await executeLimited(c, rec, parameter, opts.refused);
  const { configure, afterEnd } = ex;
  const end = owedEnd(ex.end, rec.elementType, configure, deps.nodeId);
  let recorded = false;
  try {
    recorded = await recordEnd(store, pending, rec.id, end);
  } catch (err) {
    // The store failed (its database went away): the run keeps its last recorded status. Not
    // thrown: an in-process run has nobody awaiting it, and an unhandled rejection ends the
    // process (docs/errors.md, "Bad input"). A run-sync still sees the failed insert it awaits.
    deps.logger.error({ err, runId: rec.id, status: end.status }, "could not record a run's end");
  }
  // Not held any more: left STARTED (a failed write, even one that was applied), it is an orphan.
  release();
  if (recorded) {
    chargeEnd(c, rec, end);
    if (pending?.wroteEnded) events.publish({ type: "created", run: rec });
    events.publish({ type: "ended", runId: rec.id, end, run: rec, configure });
  } else {
    await keepTerminatedOutput(c, rec, end);
    events.notify(rec.id);
  }
  afterEnd?.();
  return { end, recorded };
}

/**
 * A terminate recorded the run CANCELED before its process was gone (terminate(), below): what the
 * task printed until then is added to that record (docs/script-service.md), counted towards its
 * app. Whatever this end's own status: a task that ended by itself before this node heard of a
 * terminate made elsewhere ends SUCCESS or FAILURE here, and printed all the same. The store
 * writes only on a CANCELED record without output (a run ended otherwise keeps its record as it
 * is). Nothing for an end without output; never throws.
 */
async function keepTerminatedOutput<Req extends RunRequest>(
  c: Lifecycle<Req>,
  rec: ExecRun,
  end: RunEnd,
): Promise<void> {
  if (!(end.stdout || end.stderr)) return;
  const out = { stdout: end.stdout ?? "", stderr: end.stderr ?? "" };
  try {
    if (await c.store.keepOutput(rec.id, out))
      c.deps.stored?.charge(rec.scope.app, out.stdout.length + out.stderr.length);
  } catch (err) {
    c.deps.logger.error({ err, runId: rec.id }, "could not keep a terminated run's output");
  }
}

/** What the end wrote, counted towards its app until the next read (stored-quota.ts). */
function chargeEnd<Req extends RunRequest>(c: Lifecycle<Req>, rec: ExecRun, end: RunEnd): void {
  const { stored } = c.deps;
  if (!stored) return;
  const texts = [end.summary, end.result, end.error, end.stdout, end.stderr];
  let bytes = end.detail ? JSON.stringify(end.detail).length : 0;
  for (const t of texts) bytes += t?.length ?? 0;
  stored.charge(rec.scope.app, bytes);
}

/** The record of a run that was prepared to start at once but has to wait for its turn. */
export function asQueued(rec: NewRun): NewRun {
  return { ...rec, status: "QUEUED", nodeId: null, startTime: null };
}

/** Commits a QUEUED run with its job and tells the subscribers. */
export async function commitQueued<Req extends RunRequest>(
  c: Lifecycle<Req>,
  rec: NewRun,
  parameter: unknown,
): Promise<void> {
  const { deps, queuedHere, events, executor } = c;
  // Only a queue that runs its jobs here guarantees this process takes the job (else the map would leak).
  if (deps.queueIsLocal) queuedHere.keep(rec, parameter);
  try {
    await deps.commitQueued(rec, { runId: rec.id, kind: executor.kind, scope: rec.scope });
  } catch (err) {
    queuedHere.delete(rec.id);
    throw err;
  }
  events.publish({ type: "created", run: rec });
}

/**
 * Refuses a new run, before anything is written, when its app stores LIMIT_STORED_BYTES_PER_APP
 * (28010008; docs/security.md, "What an app may store"); counts what its record stores (parameter,
 * name, initiator, webhook targets) towards the app.
 */
export function checkStored<Req extends RunRequest>(c: Lifecycle<Req>, rec: NewRun): Promise<void> {
  const bytes = newRunBytes(rec);
  return (
    c.deps.stored?.admit(rec.scope.app, bytes, `a run of ${rec.elementName}`) ?? Promise.resolve()
  );
}

/** Refuses a run that would wait when the queued runs, or its app's, are at their limit (429). */
export function checkBound<Req extends RunRequest>(c: Lifecycle<Req>, rec: NewRun): Promise<void> {
  return c.deps.queued.admit(rec.scope.app);
}

export async function readBack<Req extends RunRequest>(
  c: Lifecycle<Req>,
  rec: NewRun,
): Promise<Run> {
  const { store, deps } = c;
  const r = await store.getRun(rec.scope, rec.id);
  if (!r) throw new SluiceError(deps.notFound, [rec.id]);
  return r;
}

export async function terminate<Req extends RunRequest>(
  c: Lifecycle<Req>,
  r: Run,
): Promise<boolean> {
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
