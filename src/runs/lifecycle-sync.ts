import type { Clock } from "../clock.ts";
import { type NewRun, TERMINAL } from "../store/types.ts";
import {
  asQueued,
  checkBound,
  checkStored,
  commitQueued,
  holdParameter,
  type Lifecycle,
  readBack,
  run,
  terminate,
} from "./lifecycle-core.ts";
import type { LifecycleDeps, RunRequest, SyncRun, SyncWait } from "./lifecycle-types.ts";
import { RunStop } from "./outcome.ts";
import { waitForRunEnd } from "./wait.ts";
import {
  endedRun,
  insertStarted,
  type PendingRecord,
  SYNC_WRITE_BEHIND_MS,
} from "./write-behind.ts";

/**
 * One rule for flows and tasks: absent or 0 waits until the end, and every wait is bounded by
 * MAX_WAIT_S (docs/architecture.md, "Run-sync").
 */
function waitSeconds(wait: SyncWait, limits: LifecycleDeps["limits"]): number {
  return wait.timeoutS && wait.timeoutS > 0
    ? Math.min(wait.timeoutS, limits.maxWaitS)
    : limits.maxWaitS;
}

export async function runSync<Req extends RunRequest>(
  c: Lifecycle<Req>,
  req: Req,
  wait: SyncWait,
): Promise<SyncRun> {
  const { store, clock, events, limits, executor, active } = c;
  executor.admit?.();
  const rec = await executor.prepare(req, "STARTED", true);
  await checkStored(c, rec);
  if (rec.runLimit != null) return runSyncLimited(c, asQueued(rec), req.parameter, wait);
  holdParameter(c, rec);
  // Held from before its write-behind insert until its end is written (orphans.ts).
  const release = c.deps.here.hold(rec.id);
  const pending: PendingRecord = { rec, inserted: null, wroteEnded: false };
  const grace = clock.setTimeout(() => {
    insertStarted(store, pending);
    pending.inserted?.then(
      () => events.publish({ type: "created", run: rec }),
      () => {},
    );
  }, SYNC_WRITE_BEHIND_MS);
  const done = run(c, rec, req.parameter, release, { pending });
  const waitS = waitSeconds(wait, limits);
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
  const why = `killed when the caller's wait of ${waitS} s elapsed (terminateOnTimeout)`;
  active.get(rec.id)?.abort(new RunStop("timeout", why));
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
  const { limits, store, events } = c;
  await checkBound(c, rec);
  await commitQueued(c, rec, parameter);
  const waitS = waitSeconds(wait, limits);
  const ran = await waitForRunEnd(
    { store, events, clock: c.clock },
    rec.scope,
    rec.id,
    waitS * 1000,
  );
  const now = ran ?? (await readBack(c, rec));
  if (TERMINAL.has(now.status) || !wait.terminateOnTimeout)
    return { run: now, killedOnTimeout: false };
  // It may have ended on its own since it was read: then the answer is its own end.
  const killed = await terminate(c, now);
  return { run: await readBack(c, rec), killedOnTimeout: killed };
}
