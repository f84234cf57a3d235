import path from "node:path";
import { fileURLToPath } from "node:url";
import type { Config } from "../config.ts";
import { chooseCgroups } from "./cgroup-choice.ts";
import {
  canceledBeforeStart,
  failure,
  overMemory,
  refusingRunner,
} from "./python-runner-outcomes.ts";
import {
  bwrapArgs,
  detectSandbox,
  IN_SANDBOX,
  type Logger,
  type SandboxKind,
  zygoteArgs,
} from "./python-runner-sandbox.ts";
import { type KillReason, type RunningTask, runOnChild } from "./python-runner-task.ts";
import { WorkDirs, warnIfUntraversable } from "./python-runner-workdir.ts";
import { ZygotePool } from "./python-runner-zygote.ts";
import type { PythonRunner, TaskOutcome, TaskSpec } from "./runner-types.ts";
import { createSyntaxChecker } from "./syntax-check.ts";
import { createTaskCgroups, type TaskCgroup } from "./task-cgroups.ts";
import { claimUidBlock, killUidBlock } from "./uid-blocks.ts";

export interface PythonRunnerDeps {
  config: {
    python: Config["python"];
    limits: { outputBytes: number; resultBytes: number; maxRunS: number };
    dataDir: string;
  };
  logger: Logger;
}

export type { PythonRunner } from "./runner-types.ts";

const ZYGOTE_DIR = fileURLToPath(new URL("./python/", import.meta.url));

interface TaskState {
  killReason?: KillReason;
  running?: RunningTask;
}

export async function createPythonRunner(deps: PythonRunnerDeps): Promise<PythonRunner> {
  const { python, limits, dataDir } = deps.config;
  const { logger } = deps;
  if (!path.isAbsolute(python.executable)) {
    throw new Error(`python executable must be an absolute path, got "${python.executable}"`);
  }
  const choice = detectSandbox(python, logger);
  const cgroup = chooseCgroups(python, logger);
  if (choice.kind === "refused" || cgroup.kind === "refused") {
    const refusal = [choice.refusal, cgroup.refusal].filter(Boolean).join("; ");
    return refusingRunner(refusal || "script tasks are refused", choice.kind, cgroup.kind);
  }
  const sandbox: SandboxKind = choice.kind;
  // Uids of this process only, so that other Sluice processes on the host never share them.
  const uids =
    sandbox !== "none"
      ? claimUidBlock(python, Math.max(256, python.concurrency * 4))
      : { base: python.uidBase, count: python.uidCount, release: () => {} };
  if (sandbox !== "none") {
    const killed = killUidBlock(uids);
    if (killed > 0)
      logger.warn(
        { killed, uidBase: uids.base },
        "killed task processes left by an earlier run of this uid block",
      );
  }
  // The last uids of the block are the syntax checks', one per concurrent check: never a task's.
  const checkUids = python.check.concurrency;
  const syntax = createSyntaxChecker({
    python,
    sandbox,
    uids:
      sandbox !== "none"
        ? Array.from({ length: checkUids }, (_, i) => uids.base + uids.count - checkUids + i)
        : undefined,
    logger,
  });
  const dirs = new WorkDirs({
    root: path.join(dataDir, "tasks"),
    uidBase: uids.base,
    uidCount: uids.count - (sandbox !== "none" ? checkUids : 0),
    switchUid: sandbox !== "none",
  });
  await dirs.init();
  if (sandbox === "uid") warnIfUntraversable(dirs.root, logger);
  // Named after the uid block, which no other service process holds (docs/security.md).
  const cgroups =
    cgroup.kind === "off"
      ? undefined
      : await createTaskCgroups({
          mountRoot: python.cgroupRoot,
          block: sandbox !== "none" ? String(uids.base) : `p${process.pid}-${Date.now()}`,
          limits: python,
          logger,
        }).catch(async (err: unknown) => {
          await syntax.close();
          uids.release();
          throw err;
        });
  const env = { PATH: "/usr/local/bin:/usr/bin:/bin", LANG: "C.UTF-8" }; // never our secrets
  const pyArgs = ["-I", "-B"]; // -B: never write .pyc next to our sources
  const inBwrap = sandbox === "bwrap";
  const pool = new ZygotePool({
    command: inBwrap ? python.bwrap : python.executable,
    args: inBwrap
      ? [
          ...bwrapArgs({
            executable: python.executable,
            zygoteDir: ZYGOTE_DIR,
            tasksDir: dirs.root,
            network: python.network,
            zygote: true,
          }),
          python.executable,
          ...pyArgs,
          `${IN_SANDBOX.zygote}/zygote.py`,
          // The probe at start-up checked these layers: the sandbox without them is no sandbox.
          ...zygoteArgs(python, true),
        ]
      : // SCRIPT_SANDBOX=none is the operator's acceptance of less: a missing layer is a warning.
        [...pyArgs, path.join(ZYGOTE_DIR, "zygote.py"), ...zygoteArgs(python, false, dirs.root)],
    env,
    prefork: Math.max(1, python.prefork),
    logger,
    onChild: cgroups && ((pid) => cgroups.bind(pid)),
    onIdleGone: cgroups && ((pid) => void cgroups.take(pid).release()),
  });
  try {
    await pool.start();
  } catch (err) {
    await pool.close().catch(() => {});
    await cgroups?.close();
    throw err;
  }
  logger.info(
    { sandbox, cgroup: cgroup.kind, zygotePid: pool.zygotePid, prefork: python.prefork },
    "python runner up",
  );

  const tasks = new Map<string, TaskState>();
  const queue: Array<() => void> = [];
  let running = 0;
  let closed = false;

  const acquireSlot = async (): Promise<void> => {
    if (running < python.concurrency && queue.length === 0) {
      running++;
      return;
    }
    await new Promise<void>((resolve) => queue.push(resolve));
  };
  const releaseSlot = (): void => {
    const next = queue.shift();
    if (next)
      next(); // the slot passes straight to the next waiter
    else running--;
  };

  const message = (
    spec: TaskSpec,
    cwd: string,
    uid: number | undefined,
    gid: number | undefined,
    sweep: boolean,
    own: boolean,
  ) => {
    const runS = spec.timeoutMs !== undefined ? spec.timeoutMs / 1000 : limits.maxRunS;
    return `${JSON.stringify({
      id: spec.taskId,
      name: spec.source.name,
      kind: spec.source.kind,
      src: Buffer.from(spec.source.content).toString("base64"),
      param: spec.parameter ?? null,
      cwd,
      uid,
      gid,
      sweep,
      own,
      lim: {
        cpu: Math.ceil(Math.min(runS, limits.maxRunS)) + 1,
        as: python.memoryBytes,
        fsize: python.fileSizeBytes,
        nofile: python.openFiles,
        // Only meaningful per uid: with a shared uid it would count the service's processes.
        nproc: uid !== undefined ? python.processes : 0,
      },
    })}\n`;
  };

  async function execute(spec: TaskSpec, state: TaskState): Promise<TaskOutcome> {
    const name = spec.workDirName ?? spec.taskId;
    const wd = await dirs.acquire(name, spec.workDirName === undefined);
    let childPid = 0;
    let cg: TaskCgroup | undefined;
    try {
      if (state.killReason) return canceledBeforeStart(state.killReason);

      const child = await pool.take();
      childPid = child.pid;
      cg = cgroups?.take(child.pid);
      if (cg && !(await cg.ready)) {
        pool.discard(child);
        return failure("CgroupUnavailable", "the task could not be put in a cgroup of its own");
      }

      const cwd = inBwrap ? `${IN_SANDBOX.tasks}/${wd.name}` : wd.dir;
      // A directory no other task shares and nothing keeps gets a tmpfs of its own over it.
      const own = spec.workDirName === undefined && spec.keepWorkDir !== true;
      const msg = message(spec, cwd, wd.uid, wd.gid, wd.privateUid, own);
      const rt = runOnChild(pool, child, msg, limits);
      state.running = rt;
      if (state.killReason) rt.kill(state.killReason);
      const limitMs = Math.min(spec.timeoutMs ?? Number.POSITIVE_INFINITY, limits.maxRunS * 1000);
      const timer = setTimeout(() => rt.kill("timeout"), limitMs);
      try {
        const { outcome } = await rt.done;
        return cg?.oomKilled() ? overMemory(outcome, python.memoryBytes) : outcome;
      } finally {
        clearTimeout(timer);
      }
    } finally {
      // The outcome does not wait for the clean-up; the next task with this name or uid does.
      // Whatever the task reported, its uid is swept and its cgroup emptied from outside it
      // (docs/security.md): the zygote confirms its child is reaped, then Node kills what is left.
      const taskCg = cg;
      const sweep = async (uid: number | undefined) => {
        if (childPid === 0) return true; // nothing ever ran as this uid
        const swept = uid === undefined || (await pool.sweep(uid, childPid));
        const emptied = (await taskCg?.release()) ?? true;
        if (!swept || !emptied)
          logger.error(
            { uid, workDir: name, swept, emptied },
            "task leftovers not confirmed dead: uid retired",
          );
        return swept && emptied;
      };
      if (wd.uid === undefined) void sweep(undefined); // no uid for the work dir to wait for
      dirs.release(wd, spec.keepWorkDir === true, sweep).catch((err: unknown) => {
        logger.warn({ err, workDir: name }, "could not clean task working directory");
      });
    }
  }

  return {
    sandbox,
    cgroup: cgroup.kind,
    refusal: undefined,
    zygotePid: () => pool.zygotePid,
    syntax,

    async run(spec: TaskSpec): Promise<TaskOutcome> {
      if (closed) return failure("RunnerClosed", "python runner is closed");
      if (tasks.has(spec.taskId))
        return failure("DuplicateTask", `task ${spec.taskId} is already running`);
      const state: TaskState = {};
      tasks.set(spec.taskId, state);
      try {
        await acquireSlot();
        try {
          if (state.killReason) return canceledBeforeStart(state.killReason);
          if (closed) return failure("RunnerClosed", "python runner is closed");
          return await execute(spec, state);
        } finally {
          releaseSlot();
        }
      } catch (err) {
        logger.error({ err, taskId: spec.taskId }, "python task could not run");
        return failure("RunnerError", err instanceof Error ? err.message : String(err));
      } finally {
        tasks.delete(spec.taskId);
      }
    },

    kill(taskId, reason) {
      const state = tasks.get(taskId);
      if (!state || state.killReason) return false;
      state.killReason = reason;
      state.running?.kill(reason);
      return true;
    },

    stats: () => ({ running, idle: pool.idle, queued: queue.length }),

    async close() {
      if (closed) return;
      closed = true;
      for (const state of tasks.values()) {
        state.killReason ??= "terminate";
        state.running?.kill(state.killReason);
      }
      const waiting = queue.splice(0);
      running += waiting.length; // each will release the slot it never really got
      for (const next of waiting) next();
      await syntax.close();
      await pool.close();
      await dirs.settle();
      await cgroups?.close();
      // Leftovers must not outlive the service: they would run on with nobody to sweep them.
      if (sandbox !== "none") killUidBlock(uids);
      uids.release();
    },
  };
}
