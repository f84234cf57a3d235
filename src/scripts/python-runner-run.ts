import { limitMs, takeWithin, withEnv } from "./python-runner-env-wait.ts";
import { canceledBeforeStart, failure, overMemory } from "./python-runner-outcomes.ts";
import { IN_SANDBOX } from "./python-runner-sandbox.ts";
import type { Runner, TaskState } from "./python-runner-state.ts";
import { type KillReason, runOnChild } from "./python-runner-task.ts";
import type { WorkDir } from "./python-runner-workdir.ts";
import type { Child, ZygotePool } from "./python-runner-zygote.ts";
import type { TaskOutcome, TaskSpec } from "./runner-types.ts";
import type { TaskCgroup } from "./task-cgroups.ts";

export type { Runner, RunnerLimits, TaskState, TaskStep } from "./python-runner-state.ts";

async function acquireSlot(r: Runner): Promise<void> {
  if (r.running < r.python.concurrency && r.queue.length === 0) {
    r.running++;
    return;
  }
  await new Promise<void>((resolve) => r.queue.push(resolve));
}

function releaseSlot(r: Runner): void {
  const next = r.queue.shift();
  if (next)
    next(); // the slot passes straight to the next waiter
  else r.running--;
}

/** Where the task runs and as whom, as the zygote's child is told it. */
interface Placement {
  cwd: string;
  uid: number | undefined;
  gid: number | undefined;
  sweep: boolean;
  own: boolean;
}

function taskMessage(r: Runner, spec: TaskSpec, p: Placement): string {
  const { python, limits } = r;
  const runS = spec.timeoutMs !== undefined ? spec.timeoutMs / 1000 : limits.maxRunS;
  return `${JSON.stringify({
    id: spec.taskId,
    name: spec.source.name,
    kind: spec.source.kind,
    src: Buffer.from(spec.source.content).toString("base64"),
    param: spec.parameter ?? null,
    // Secret values travel only in this message over the child's pipe, never in a record.
    env: spec.env ?? {},
    ...p,
    lim: {
      cpu: Math.ceil(Math.min(runS, limits.maxRunS)) + 1,
      as: python.memoryBytes,
      fsize: python.fileSizeBytes,
      nofile: python.openFiles,
      // Only meaningful per uid: with a shared uid it would count the service's processes.
      nproc: p.uid !== undefined ? python.processes : 0,
    },
  })}\n`;
}

/**
 * A child for the task, in its cgroup. One whose zygote died before the task was written to it
 * never ran the task: it is dropped, and the task waits for a child of the restarted zygote
 * (docs/script-service.md, "Limits and isolation").
 */
async function takeChild(
  r: Runner,
  spec: TaskSpec,
  state: TaskState,
  taken: { childPid: number; cg: TaskCgroup | undefined },
): Promise<Child | TaskOutcome> {
  for (;;) {
    const pool = state.pool;
    let child: Child | KillReason;
    try {
      child = await takeWithin(r, spec, state, pool);
    } catch (err) {
      const why = err instanceof Error ? err.message : String(err);
      return failure("TaskStartFailed", `could not start the task: ${why}`);
    }
    if (typeof child === "string") return canceledBeforeStart(child);
    if (r.pauseAt) await r.pauseAt(spec.taskId, "child");
    const cg = r.cgroups?.take(child.pid);
    const ready = cg === undefined || (await cg.ready);
    if (pool.lost(child)) {
      pool.discard(child);
      void cg?.release(); // nothing of the task ran in it
      if (state.killReason) return canceledBeforeStart(state.killReason);
      continue;
    }
    taken.childPid = child.pid;
    taken.cg = cg;
    if (ready) return child;
    pool.discard(child);
    return failure("CgroupUnavailable", "the task could not be put in a cgroup of its own");
  }
}

/** Runs the task on a child of the pool, killed past its time limit. */
async function runOnTakenChild(
  r: Runner,
  spec: TaskSpec,
  state: TaskState,
  wd: WorkDir,
  taken: { childPid: number; cg: TaskCgroup | undefined },
): Promise<TaskOutcome> {
  const child = await takeChild(r, spec, state, taken);
  if (!("pid" in child)) return child;
  const cg = taken.cg;
  const cwd = r.sandbox === "bwrap" ? `${IN_SANDBOX.tasks}/${wd.name}` : wd.dir;
  // A directory no other task shares and nothing keeps gets a tmpfs of its own over it.
  const own = spec.workDirName === undefined && spec.keepWorkDir !== true;
  const msg = taskMessage(r, spec, { cwd, uid: wd.uid, gid: wd.gid, sweep: wd.privateUid, own });
  const rt = runOnChild(state.pool, child, msg, r.limits, r.clock, spec.onOutput);
  state.running = rt;
  if (state.killReason) rt.kill(state.killReason);
  const left = Math.max(0, limitMs(r, spec) - state.waitedMs);
  const timer = r.clock.setTimeout(() => rt.kill("timeout"), left);
  try {
    const { outcome } = await rt.done;
    return cg?.oomKilled() ? overMemory(outcome, r.python.memoryBytes) : outcome;
  } finally {
    r.clock.clearTimeout(timer);
  }
}

/**
 * The task's working directory and uid: from its zygote's slice when it preloads. A shared
 * directory in use with a group of another range cannot be joined from there, so such a task moves
 * to a plain zygote of its environment (docs/security.md, "Preloading").
 */
async function acquireDir(
  r: Runner,
  spec: TaskSpec,
  state: TaskState,
): Promise<WorkDir | TaskOutcome> {
  const name = spec.workDirName ?? spec.taskId;
  const privateName = spec.workDirName === undefined;
  const lease = state.lease;
  const slice = lease?.uids && { ...lease.uids, hold: lease.hold };
  const wd = await r.dirs.acquire(name, privateName, slice);
  if (wd) return wd;
  const env = spec.source.env;
  if (!env) throw new Error("a task of the default zygote was refused its directory");
  const plain = await withEnv(r, spec, state, false);
  if ("status" in plain) return plain;
  lease?.release();
  state.lease = plain;
  state.pool = plain.pool;
  return (await r.dirs.acquire(name, privateName)) as WorkDir;
}

async function execute(r: Runner, spec: TaskSpec, state: TaskState): Promise<TaskOutcome> {
  const name = spec.workDirName ?? spec.taskId;
  const done = () => state.lease?.release();
  const wd = await acquireDir(r, spec, state).catch((err: unknown) => {
    done();
    throw err;
  });
  if (!("dir" in wd)) {
    done();
    return wd;
  }
  const taken: { childPid: number; cg: TaskCgroup | undefined } = { childPid: 0, cg: undefined };
  try {
    if (r.pauseAt) await r.pauseAt(spec.taskId, "workDir");
    if (state.killReason) return canceledBeforeStart(state.killReason);
    return await runOnTakenChild(r, spec, state, wd, taken);
  } finally {
    // The outcome does not wait for the clean-up; the next task with this name or uid does.
    // The task's zygote is held until its sweep is done (the zygote confirms it).
    const sweep = (uid: number | undefined) =>
      sweepTask(r, state.pool, name, taken.childPid, taken.cg, uid).finally(done);
    if (wd.uid === undefined) void sweep(undefined); // no uid for the work dir to wait for
    r.dirs.release(wd, spec.keepWorkDir === true, sweep).catch((err: unknown) => {
      r.logger.warn({ err, workDir: name }, "could not clean task working directory");
    });
  }
}

/**
 * Whatever the task reported, its uid is swept and its cgroup emptied from outside it
 * (docs/security.md): the zygote confirms its child is reaped, then Node kills what is left.
 */
async function sweepTask(
  r: Runner,
  pool: ZygotePool,
  workDir: string,
  childPid: number,
  cg: TaskCgroup | undefined,
  uid: number | undefined,
): Promise<boolean> {
  if (childPid === 0) return true; // nothing ever ran as this uid
  const swept = uid === undefined || (await pool.sweep(uid, childPid));
  const emptied = (await cg?.release()) ?? true;
  if (!swept || !emptied)
    r.logger.error(
      { uid, workDir, swept, emptied },
      "task leftovers not confirmed dead: uid retired",
    );
  return swept && emptied;
}

export async function runTask(r: Runner, spec: TaskSpec): Promise<TaskOutcome> {
  if (r.closed) return failure("RunnerClosed", "python runner is closed");
  if (r.tasks.has(spec.taskId))
    return failure("DuplicateTask", `task ${spec.taskId} is already running`);
  const state: TaskState = { pool: r.pool, waitedMs: 0 };
  r.tasks.set(spec.taskId, state);
  let handedOver = false; // from execute on, the lease is released by the task's sweep
  try {
    // Its environment (built here first if this node lacks it) before a slot: a build holds none.
    if (spec.source.env) {
      const env = await withEnv(r, spec, state, true);
      if ("status" in env) return env;
      state.lease = env;
      state.pool = env.pool;
    }
    await acquireSlot(r);
    try {
      if (r.pauseAt) await r.pauseAt(spec.taskId, "slot");
      if (state.killReason) return canceledBeforeStart(state.killReason);
      if (r.closed) return failure("RunnerClosed", "python runner is closed");
      handedOver = true;
      return await execute(r, spec, state);
    } finally {
      releaseSlot(r);
    }
  } catch (err) {
    r.logger.error({ err, taskId: spec.taskId }, "python task could not run");
    return failure("RunnerError", err instanceof Error ? err.message : String(err));
  } finally {
    if (!handedOver) state.lease?.release();
    r.tasks.delete(spec.taskId);
  }
}

export function killTask(r: Runner, taskId: string, reason: KillReason): boolean {
  const state = r.tasks.get(taskId);
  if (!state || state.killReason) return false;
  state.killReason = reason;
  state.wake?.(reason);
  state.running?.kill(reason);
  return true;
}

/** At close: running tasks are terminated, waiting ones let through to find the runner closed. */
export function endTasks(r: Runner): void {
  for (const state of r.tasks.values()) {
    state.killReason ??= "terminate";
    state.wake?.(state.killReason); // a wait for its zygote or child ends too
    state.running?.kill(state.killReason);
  }
  const waiting = r.queue.splice(0);
  r.running += waiting.length; // each will release the slot it never really got
  for (const next of waiting) next();
}
