import path from "node:path";
import { fileURLToPath } from "node:url";
import type { Clock } from "../clock.ts";
import type { Config } from "../config.ts";
import {
  bwrapArgs,
  IN_SANDBOX,
  type Logger,
  type SandboxKind,
  zygoteArgs,
} from "./python-runner-sandbox.ts";
import { ZygotePool } from "./python-runner-zygote.ts";
import type { TaskCgroups } from "./task-cgroups.ts";
import type { UidSlice } from "./uid-slices.ts";

const ZYGOTE_DIR = fileURLToPath(new URL("./python/", import.meta.url));

type Sandbox = Exclude<SandboxKind, "refused">;

/**
 * An environment's zygote: its python, and the modules it imports before it forks, only in a user
 * namespace mapping `slice`.
 */
export interface ZygoteEnv {
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

/**
 * `cmd`, joining the cgroup whose `cgroup.procs` is `procs` before it starts (a shell that writes
 * its own pid there, then becomes `cmd`): everything it forks is born in that cgroup. Node could
 * only move it once spawned, and bubblewrap forks the zygote at once, before that lands. A
 * failed join starts it all the same: it still dies with its parent (docs/security.md, "The end
 * of a task").
 */
export function heldIn(procs: string | undefined, cmd: { command: string; args: string[] }) {
  if (procs === undefined) return cmd;
  // A failed join is said on stderr, which the runner logs as the zygote's (its tasks are still
  // held by their own cgroups; only the next start-up's sweep misses this zygote chain).
  const join =
    'echo $$ 2>/dev/null > "$0" || echo "could not join the zygotes cgroup $0" >&2; exec "$@"';
  return { command: "/bin/sh", args: ["-c", join, procs, cmd.command, ...cmd.args] };
}

/**
 * A zygote's pool, started: its command line (inside bubblewrap or the bare interpreter), its
 * children put in their task cgroups, and a preloading one held in a cgroup of its own.
 */
export async function startPool(
  python: Config["python"],
  sandbox: Sandbox,
  tasksDir: string,
  cgroups: TaskCgroups | undefined,
  logger: Logger,
  clock: Clock,
  env?: ZygoteEnv,
): Promise<ZygotePool> {
  const procs = cgroups?.zygoteProcs();
  const pool = new ZygotePool({
    ...heldIn(procs, zygoteCommand(python, sandbox, tasksDir, env)),
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
      ? {
          plainArgs: heldIn(
            procs,
            zygoteCommand(python, sandbox, tasksDir, { ...env, modules: [] }),
          ).args,
        }
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
