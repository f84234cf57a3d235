import path from "node:path";
import { type Clock, systemClock } from "../clock.ts";
import type { Config } from "../config.ts";
import { maskOutcome } from "../secrets/mask.ts";
import { createStreamMasker } from "../secrets/mask-stream.ts";
import { chooseCgroups } from "./cgroup-choice.ts";
import { EnvPools } from "./python-runner-envs.ts";
import { refusingRunner } from "./python-runner-outcomes.ts";
import {
  endTasks,
  killTask,
  type Runner,
  type RunnerLimits,
  runTask,
} from "./python-runner-run.ts";
import { detectSandbox, type Logger, type SandboxKind } from "./python-runner-sandbox.ts";
import { layOutUids, retireSlice, type UidLayout } from "./python-runner-uids.ts";
import { WorkDirs, warnIfUntraversable } from "./python-runner-workdir.ts";
import type { ZygotePool } from "./python-runner-zygote.ts";
import type { PythonRunner, TaskSpec } from "./runner-types.ts";
import { createScriptEnvs } from "./script-envs.ts";
import { createSyntaxChecker } from "./syntax-check.ts";
import { createTaskCgroups, type TaskCgroups } from "./task-cgroups.ts";
import { killUidBlock } from "./uid-blocks.ts";
import { startPool } from "./zygote-start.ts";

export interface PythonRunnerDeps {
  config: {
    python: Config["python"];
    limits: RunnerLimits;
    dataDir: string;
  };
  logger: Logger;
  /** The task time limits' timers; the system clock when a test or bench builds a runner alone. */
  clock?: Clock;
  /** Tests only: each task awaits this at each step on its way to its child. */
  pauseAt?: Runner["pauseAt"];
}

export type { PythonRunner } from "./runner-types.ts";

type Sandbox = Exclude<SandboxKind, "refused">;

export async function createPythonRunner(deps: PythonRunnerDeps): Promise<PythonRunner> {
  const { python, limits, dataDir } = deps.config;
  const { logger } = deps;
  const clock = deps.clock ?? systemClock;
  if (!path.isAbsolute(python.executable)) {
    throw new Error(`python executable must be an absolute path, got "${python.executable}"`);
  }
  const choice = detectSandbox(python, logger);
  const cgroup = chooseCgroups(python, logger);
  const envs = createScriptEnvs({
    python: python.executable,
    envs: python.envs,
    dataDir,
    clock,
    logger,
  });
  if (choice.kind === "refused" || cgroup.kind === "refused") {
    const refusal = [choice.refusal, cgroup.refusal].filter(Boolean).join("; ");
    return refusingRunner(refusal || "script tasks are refused", choice.kind, cgroup.kind, envs);
  }
  const sandbox: Sandbox = choice.kind;
  const uids = layOutUids(python, sandbox, logger);
  const syntax = createSyntaxChecker({ python, sandbox, uids: uids.checks, logger, clock });
  const { dirs, cgroups, pool } = await openParts({
    python,
    sandbox,
    cgroupsOn: cgroup.kind !== "off",
    uids,
    dataDir,
    logger,
    clock,
  }).catch(async (err: unknown) => {
    await giveBack(syntax, sandbox, uids.block, logger);
    throw err;
  });
  const envPools = new EnvPools({
    max: python.envs.zygotes,
    logger,
    slices: uids.slices,
    // Import-time code of packages runs only in a zygote whose user namespace maps its slice.
    start: (dir, manifest, slice, signal) =>
      startPool(python, sandbox, dirs.root, cgroups, logger, clock, {
        dir,
        modules: slice ? manifest.modules : [],
        slice,
        signal,
      }),
    retire: (slice) => retireSlice(dirs, slice),
  });
  envs.onRemoved((hash) => envPools.forget(hash));
  logger.info(
    { sandbox, cgroup: cgroup.kind, zygotePid: pool.zygotePid, prefork: python.prefork },
    "python runner up",
  );
  const r: Runner = {
    python,
    limits,
    logger,
    clock,
    sandbox,
    uids: uids.block,
    syntax,
    dirs,
    cgroups,
    pool,
    envs,
    envPools,
    tasks: new Map(),
    queue: [],
    running: 0,
    closed: false,
    pauseAt: deps.pauseAt,
  };
  return runnerApi(r, cgroup.kind);
}

/** What the service sees of a runner that runs tasks. */
function runnerApi(r: Runner, cgroup: PythonRunner["cgroup"]): PythonRunner {
  return {
    sandbox: r.sandbox,
    cgroup,
    refusal: undefined,
    zygotePid: () => r.pool.zygotePid,
    syntax: r.syntax,
    envs: r.envs,
    // The one place a task's secret values are masked in what it reports (docs/secrets.md).
    run: async (spec) => {
      const live = liveMasked(spec);
      const outcome = await runTask(r, live.spec);
      live.end();
      return maskOutcome(outcome, spec.mask);
    },
    kill: (taskId, reason) => killTask(r, taskId, reason),
    stats: () => ({
      running: r.running,
      idle: r.pool.idle,
      queued: r.queue.length,
      envZygotes: r.envPools.size,
    }),
    close: () => closeRunner(r),
  };
}

/** A task's live output masked as its outcome is: per stream, a value split by a chunk too. */
function liveMasked(spec: TaskSpec): { spec: TaskSpec; end(): void } {
  const { onOutput } = spec;
  if (!onOutput) return { spec, end() {} };
  const maskers = { stdout: createStreamMasker(spec.mask), stderr: createStreamMasker(spec.mask) };
  return {
    spec: {
      ...spec,
      onOutput(stream, text) {
        const out = maskers[stream].push(text);
        if (out) onOutput(stream, out);
      },
    },
    end() {
      for (const stream of ["stdout", "stderr"] as const) {
        const rest = maskers[stream].end();
        if (rest) onOutput(stream, rest);
      }
    },
  };
}

/**
 * What a start that failed took goes back as at close: a block this process still held would be
 * skipped by its next runner (docs/security.md, "Layers"). Given back whatever fails here (its
 * next claimer kills its leftovers first); the start's own error is the one its caller sees.
 */
async function giveBack(
  syntax: Runner["syntax"],
  sandbox: Sandbox,
  block: Runner["uids"],
  logger: Logger,
): Promise<void> {
  try {
    await syntax.close();
    if (sandbox !== "none") killUidBlock(block);
  } catch (err) {
    logger.error({ err }, "a python runner that failed to start could not stop all it started");
  } finally {
    block.release();
  }
}

/** The work directories, the cgroups and the default zygote; cgroups opened are closed on a failure. */
async function openParts(o: {
  python: Config["python"];
  sandbox: Sandbox;
  cgroupsOn: boolean;
  uids: UidLayout;
  dataDir: string;
  logger: Logger;
  clock: Clock;
}): Promise<{ dirs: WorkDirs; cgroups: TaskCgroups | undefined; pool: ZygotePool }> {
  const { python, sandbox, logger, clock } = o;
  const dirs = await openWorkDirs(o.dataDir, sandbox, o.uids.tasks, logger);
  const cgroups = o.cgroupsOn
    ? await openCgroups(python, sandbox, o.uids.block, logger, clock)
    : undefined;
  const pool = await startPool(python, sandbox, dirs.root, cgroups, logger, clock).catch(
    async (err: unknown) => {
      await cgroups?.close();
      throw err;
    },
  );
  return { dirs, cgroups, pool };
}

async function openWorkDirs(
  dataDir: string,
  sandbox: Sandbox,
  uids: { base: number; count: number },
  logger: Logger,
): Promise<WorkDirs> {
  const dirs = new WorkDirs({
    root: path.join(dataDir, "tasks"),
    uidBase: uids.base,
    uidCount: uids.count,
    switchUid: sandbox !== "none",
  });
  await dirs.init();
  if (sandbox === "uid") warnIfUntraversable(dirs.root, logger);
  return dirs;
}

function openCgroups(
  python: Config["python"],
  sandbox: Sandbox,
  uids: Runner["uids"],
  logger: Logger,
  clock: Clock,
): Promise<TaskCgroups> {
  return createTaskCgroups({
    mountRoot: python.cgroupRoot,
    // Named after the uid block, which no other service process holds (docs/security.md).
    block: sandbox !== "none" ? String(uids.base) : `p${process.pid}-${Date.now()}`,
    limits: python,
    logger,
    clock,
  });
}

async function closeRunner(r: Runner): Promise<void> {
  if (r.closed) return;
  r.closed = true;
  endTasks(r);
  await r.syntax.close();
  await r.pool.close();
  await r.envPools.close();
  await r.dirs.settle();
  await r.cgroups?.close();
  // Leftovers must not outlive the service: they would run on with nobody to sweep them.
  if (r.sandbox !== "none") killUidBlock(r.uids);
  r.uids.release();
}
