import path from "node:path";
import { fileURLToPath } from "node:url";
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
import {
  bwrapArgs,
  detectSandbox,
  IN_SANDBOX,
  type Logger,
  type SandboxKind,
  userNamespaceRefused,
  zygoteArgs,
} from "./python-runner-sandbox.ts";
import { WorkDirs, warnIfUntraversable } from "./python-runner-workdir.ts";
import { ZygotePool } from "./python-runner-zygote.ts";
import type { PythonRunner, TaskSpec } from "./runner-types.ts";
import { createScriptEnvs } from "./script-envs.ts";
import { createSyntaxChecker } from "./syntax-check.ts";
import { createTaskCgroups, type TaskCgroups } from "./task-cgroups.ts";
import { claimUidBlock, killUidBlock, uidBlockInUse } from "./uid-blocks.ts";
import { sliceSize, type UidSlice, UidSlices } from "./uid-slices.ts";

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

const ZYGOTE_DIR = fileURLToPath(new URL("./python/", import.meta.url));

type Sandbox = Exclude<SandboxKind, "refused">;
type Uids = Runner["uids"];

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
  // Preloading zygotes each get a slice of the block (docs/security.md, "Preloading").
  const preloaders = sandbox === "bwrap" && python.envs.preload ? python.envs.zygotes : 0;
  const uids = claimUids(python, sandbox, preloaders, logger);
  // The last uids of the block are the syntax checks', one per concurrent check: never a task's;
  // before them, the slices of preloading zygotes.
  const checkUids = sandbox !== "none" ? python.check.concurrency : 0;
  const sliced = preloaders * sliceSize(python.concurrency);
  const slices =
    preloaders > 0
      ? preloadSlices(python, uids.base + uids.count - checkUids - sliced, preloaders, logger)
      : undefined;
  const syntax = createSyntaxChecker({
    python,
    sandbox,
    uids: sandbox !== "none" ? lastUids(uids, checkUids) : undefined,
    logger,
    clock,
  });
  const dirs = await openWorkDirs(
    dataDir,
    sandbox,
    { ...uids, count: uids.count - checkUids - sliced },
    logger,
  );
  const cgroups =
    cgroup.kind === "off"
      ? undefined
      : await openCgroups(python, sandbox, uids, logger, clock).catch(async (err: unknown) => {
          await syntax.close();
          uids.release();
          throw err;
        });
  const pool = await startPool(python, sandbox, dirs.root, cgroups, logger, clock).catch(
    async (err: unknown) => {
      await cgroups?.close();
      throw err;
    },
  );
  const envPools = new EnvPools({
    max: python.envs.zygotes,
    logger,
    slices,
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
    uids,
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
  return {
    sandbox,
    cgroup: cgroup.kind,
    refusal: undefined,
    zygotePid: () => pool.zygotePid,
    syntax,
    envs,
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
      idle: pool.idle,
      queued: r.queue.length,
      envZygotes: envPools.size,
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
 * A stopped preloading zygote's slice, before another zygote gets it: whatever its packages'
 * code left running is killed, decided here, outside it, and its tasks' spare directories are
 * made anew (docs/security.md, "Preloading").
 */
function retireSlice(dirs: WorkDirs, slice: UidSlice): void {
  const block = { base: slice.outer, count: slice.count + 1 };
  killUidBlock(block);
  dirs.retireRange(slice, !uidBlockInUse(block));
}

/**
 * The slices of preloading zygotes, or undefined when the kernel refuses this sandbox a user
 * namespace: asked here, of a zygote that imports nothing, so no package's code decides it.
 */
function preloadSlices(
  python: Config["python"],
  start: number,
  preloaders: number,
  logger: Logger,
): UidSlices | undefined {
  const slices = new UidSlices(start, preloaders, sliceSize(python.concurrency));
  const first = slices.take();
  const refused = first && userNamespaceRefused(python, first);
  if (first) slices.give(first);
  if (!refused) return slices;
  logger.warn(
    { problem: refused },
    "a zygote cannot have a user namespace of its own: environments are not preloaded on this node",
  );
  return undefined;
}

/**
 * A preloading zygote in a cgroup of its own, with a task's limits (docs/security.md,
 * "Preloading"): what its packages' code starts is counted, limited and killed with it.
 */
async function holdInCgroup(cgroups: TaskCgroups, pid: number): Promise<() => Promise<unknown>> {
  cgroups.bind(pid);
  const cg = cgroups.take(pid);
  if (!(await cg.ready)) {
    await cg.release();
    throw new Error("the zygote could not be put in a cgroup of its own");
  }
  return () => cg.release();
}

/** Uids of this process only, so that other Sluice processes on the host never share them. */
function claimUids(
  python: Config["python"],
  sandbox: Sandbox,
  preloaders: number,
  logger: Logger,
): Uids {
  if (sandbox === "none")
    return { base: python.uidBase, count: python.uidCount, release: () => {} };
  const size = Math.max(256, python.concurrency * 4) + preloaders * sliceSize(python.concurrency);
  const uids = claimUidBlock(python, size);
  const killed = killUidBlock(uids);
  if (killed > 0)
    logger.warn(
      { killed, uidBase: uids.base },
      "killed task processes left by an earlier run of this uid block",
    );
  return uids;
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

function lastUids(uids: Uids, n: number): number[] {
  return Array.from({ length: n }, (_, i) => uids.base + uids.count - n + i);
}

function openCgroups(
  python: Config["python"],
  sandbox: Sandbox,
  uids: Uids,
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

/**
 * An environment's zygote: its python, and the modules it imports before it forks, only in a user
 * namespace mapping `slice`.
 */
interface ZygoteEnv {
  dir: string;
  modules: string[];
  slice: UidSlice | undefined;
  /** Aborted when the runner closes: the zygote stops, even before it is ready. */
  signal: AbortSignal;
}

/** The zygote's command line: inside bubblewrap, or (SCRIPT_SANDBOX=none) the bare interpreter. */
function zygoteCommand(
  python: Config["python"],
  sandbox: Sandbox,
  tasksDir: string,
  env?: ZygoteEnv,
) {
  // -B: never write .pyc next to our sources. An environment's zygote is the service's own
  // interpreter with -S, never the venv's bin/python (a wheel's scripts can replace it): its
  // packages' .pth files and sitecustomize would otherwise run as the zygote, root, at start-up,
  // and zygote.py adds their site-packages itself once the sandbox is up (docs/security.md).
  const pyArgs = env ? ["-I", "-S", "-B"] : ["-I", "-B"];
  const slice = env?.slice;
  const envArgs = (dir: string) => [
    `--env=${dir}`,
    ...(slice ? [`--userns=${slice.outer},${slice.base},${slice.count}`] : []),
    ...(env && env.modules.length > 0 ? [`--preload=${env.modules.join(",")}`] : []),
  ];
  if (sandbox !== "bwrap")
    return {
      command: python.executable,
      // SCRIPT_SANDBOX=none is the operator's acceptance of less: a missing layer is a warning.
      args: [
        ...pyArgs,
        path.join(ZYGOTE_DIR, "zygote.py"),
        ...zygoteArgs(python, false, tasksDir),
        ...(env ? envArgs(env.dir) : []),
      ],
    };
  const sandboxArgs = bwrapArgs({
    executable: python.executable,
    zygoteDir: ZYGOTE_DIR,
    tasksDir,
    ...(env ? { envDir: env.dir } : {}),
    network: python.network,
    zygote: true,
  });
  return {
    command: python.bwrap,
    args: [
      ...sandboxArgs,
      python.executable,
      ...pyArgs,
      `${IN_SANDBOX.zygote}/zygote.py`,
      // The probe at start-up checked these layers: the sandbox without them is no sandbox.
      ...zygoteArgs(python, true),
      ...(env ? envArgs(IN_SANDBOX.env) : []),
    ],
  };
}

async function startPool(
  python: Config["python"],
  sandbox: Sandbox,
  tasksDir: string,
  cgroups: TaskCgroups | undefined,
  logger: Logger,
  clock: Clock,
  env?: ZygoteEnv,
): Promise<ZygotePool> {
  const pool = new ZygotePool({
    ...zygoteCommand(python, sandbox, tasksDir, env),
    env: { PATH: "/usr/local/bin:/usr/bin:/bin", LANG: "C.UTF-8" }, // never our secrets
    // An environment's zygote keeps fewer idle children: there may be several of them.
    prefork: env ? Math.max(1, Math.floor(python.prefork / 4)) : Math.max(1, python.prefork),
    // A preloading zygote runs a package's code: a child it reports must be its root's process,
    // and the zygote itself is in a cgroup of its own, with a task's limits, before it imports.
    ...(env?.slice ? { childUid: env.slice.outer } : {}),
    ...(env?.slice && cgroups ? { onHold: (pid: number) => holdInCgroup(cgroups, pid) } : {}),
    // An environment's zygote has a start deadline; one that preloads has a plain fallback
    // (docs/script-dependencies.md, "Warm start").
    ...(env ? { startMs: python.envs.startTimeoutMs } : {}),
    ...(env?.slice && env.modules.length > 0
      ? { plainArgs: zygoteCommand(python, sandbox, tasksDir, { ...env, modules: [] }).args }
      : {}),
    logger,
    clock,
    onChild: cgroups && ((pid) => cgroups.bind(pid)),
    onIdleGone: cgroups && ((pid) => void cgroups.take(pid).release()),
  });
  const stop = () => void pool.close().catch(() => {});
  env?.signal.addEventListener("abort", stop, { once: true });
  try {
    if (env?.signal.aborted) throw new Error("the python runner is closing");
    await pool.start();
  } catch (err) {
    await pool.close().catch(() => {});
    throw err;
  } finally {
    env?.signal.removeEventListener("abort", stop); // once started, EnvPools stops it
  }
  return pool;
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
