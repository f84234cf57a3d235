import type { ScriptEnv } from "../store/revision-types.ts";
import type { EnvLease } from "./python-runner-envs.ts";
import { canceledBeforeStart, failure } from "./python-runner-outcomes.ts";
import type { Runner, TaskState } from "./python-runner-state.ts";
import type { KillReason } from "./python-runner-task.ts";
import type { Child, ZygotePool } from "./python-runner-zygote.ts";
import type { TaskOutcome, TaskSpec } from "./runner-types.ts";

/** A task's wait for its environment's zygote (docs/script-dependencies.md, "Warm start"). */

/** The task's own time limit. */
export function limitMs(r: Runner, spec: TaskSpec): number {
  return Math.min(spec.timeoutMs ?? Number.POSITIVE_INFINITY, r.limits.maxRunS * 1000);
}

/** The zygote of the task's environment, with the environment held while the task uses it. */
export async function withEnv(
  r: Runner,
  spec: TaskSpec,
  state: TaskState,
  preload: boolean,
): Promise<EnvLease | TaskOutcome> {
  const env = spec.source.env as ScriptEnv;
  const ready = await r.envs.ensure(env);
  if (!ready.ok) return failure("EnvironmentUnavailable", ready.message);
  const unhold = r.envs.hold(env.hash);
  try {
    const lease = await waitForZygote(
      r,
      spec,
      state,
      r.envPools.acquire(ready.dir, ready.manifest, preload),
    );
    if (typeof lease === "string") {
      unhold();
      return canceledBeforeStart(lease);
    }
    return {
      pool: lease.pool,
      uids: lease.uids,
      hold: lease.hold,
      release: () => {
        lease.release();
        unhold();
      },
    };
  } catch (err) {
    unhold();
    const why = err instanceof Error ? err.message : String(err);
    return failure("EnvironmentUnavailable", `the zygote of its environment did not start: ${why}`);
  }
}

/**
 * The wait for its environment's zygote counts against the task's own time limit, and a kill
 * ends it (docs/script-dependencies.md, "Warm start"): the task then ends without it, and the
 * zygote, once it comes, is let go.
 */
function waitForZygote(
  r: Runner,
  spec: TaskSpec,
  state: TaskState,
  acquiring: Promise<EnvLease>,
): Promise<EnvLease | KillReason> {
  const since = r.clock.now();
  return new Promise((resolve, reject) => {
    let done = false;
    const end = () => {
      done = true;
      r.clock.clearTimeout(timer);
      state.wake = undefined;
      state.waitedMs += r.clock.now() - since;
    };
    const wake = (reason: KillReason) => {
      if (done) return;
      end();
      resolve(reason);
    };
    const timer = r.clock.setTimeout(
      () => wake("timeout"),
      Math.max(0, limitMs(r, spec) - state.waitedMs),
    );
    state.wake = wake;
    if (state.killReason) wake(state.killReason);
    acquiring.then(
      (lease) => {
        if (done) return lease.release();
        end();
        resolve(lease);
      },
      (err: unknown) => {
        if (done) return;
        end();
        reject(err);
      },
    );
  });
}

/**
 * The task's child from `pool`. Its wait counts against the task's own time like the wait for
 * the zygote, and a kill ends it (docs/script-dependencies.md, "Warm start"): a zygote that never
 * forks (a preloaded package can make it deaf) must not keep the task, and its slot, for good.
 */
export async function takeWithin(
  r: Runner,
  spec: TaskSpec,
  state: TaskState,
  pool: ZygotePool,
): Promise<Child | KillReason> {
  if (state.killReason) return state.killReason;
  const ended = new AbortController();
  let why: KillReason | undefined;
  const wake = (reason: KillReason) => {
    why ??= reason;
    ended.abort();
  };
  const since = r.clock.now();
  const timer = r.clock.setTimeout(
    () => wake("timeout"),
    Math.max(0, limitMs(r, spec) - state.waitedMs),
  );
  state.wake = wake;
  try {
    // A child served as the wait ended is the task's still: its run is killed at once.
    return await pool.take(ended.signal);
  } catch (err) {
    if (why) return why;
    throw err;
  } finally {
    r.clock.clearTimeout(timer);
    state.wake = undefined;
    state.waitedMs += r.clock.now() - since;
  }
}
