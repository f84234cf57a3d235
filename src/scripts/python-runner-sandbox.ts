import { spawnSync } from "node:child_process";
import { existsSync, lstatSync, readlinkSync, realpathSync } from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";
import type { Config } from "../config.ts";

/** `refused`: no isolation layer and none accepted explicitly, so no task runs at all. */
export type SandboxKind = "bwrap" | "uid" | "none" | "refused";

export interface Logger {
  info(obj: unknown, msg?: string): void;
  warn(obj: unknown, msg?: string): void;
  error(obj: unknown, msg?: string): void;
  debug(obj: unknown, msg?: string): void;
}

/** Where things appear inside the bubblewrap sandbox. */
export const IN_SANDBOX = { tasks: "/tasks", zygote: "/opt/sluice", env: "/opt/sluice-env" };

/** zygote.py, for the start-up probe. */
const ZYGOTE_DIR = fileURLToPath(new URL("./python/", import.meta.url));

const isRoot = (): boolean => process.getuid?.() === 0;

/** Mounts shared by the probe and the real sandbox: the OS read-only, nothing of the service. */
function systemMounts(executable: string): string[] {
  const args = ["--ro-bind", "/usr", "/usr", "--ro-bind", "/etc", "/etc"];
  for (const dir of ["/bin", "/sbin", "/lib", "/lib64", "/lib32"]) {
    let st: ReturnType<typeof lstatSync>;
    try {
      st = lstatSync(dir);
    } catch {
      continue;
    }
    // usr-merged systems: /bin is a link into /usr, recreate the link rather than bind it.
    if (st.isSymbolicLink()) args.push("--symlink", readlinkSync(dir), dir);
    else args.push("--ro-bind", dir, dir);
  }
  // An interpreter outside /usr (e.g. /opt/python) needs its prefix visible too.
  const real = realpathSync(executable);
  if (!/^\/(usr|bin|lib|lib64|sbin)\//.test(real)) {
    const prefix = path.dirname(path.dirname(real));
    args.push("--ro-bind", prefix, prefix);
    if (path.dirname(path.dirname(executable)) !== prefix) {
      const p2 = path.dirname(path.dirname(executable));
      args.push("--ro-bind", p2, p2);
    }
  }
  args.push("--proc", "/proc", "--dev", "/dev", "--tmpfs", "/tmp");
  args.push("--unshare-ipc", "--unshare-uts", "--hostname", "sluice", "--die-with-parent");
  // Started by root, bubblewrap keeps every capability unless told otherwise: keep only what the
  // process inside needs to switch to its task uid (which then clears them all).
  if (isRoot())
    args.push("--cap-drop", "ALL", "--cap-add", "CAP_SETUID", "--cap-add", "CAP_SETGID");
  return args;
}

/**
 * The namespaces each task gets of its own (zygote.py `--ns`): IPC, mount (its tmpfs mounts and
 * its /proc), pid, UTS and cgroup (entered once the child is in its task's cgroup) always, the
 * network unless tasks may use it (they then share the zygote's). Only root can create them
 * (docs/security.md).
 */
export function taskNamespaces(network: boolean): string[] {
  if (!isRoot()) return [];
  const always = ["ipc", "mnt", "pid", "uts", "cgroup"];
  return network ? always : ["net", ...always];
}

/**
 * bubblewrap's pid namespace is the host's: Node kills a task with `kill(-pgid)` using the pid the
 * zygote reported, a host pid; each task is the first process of a pid namespace of its own
 * (`taskNamespaces`), which the zygote creates as it forks.
 */
export function bwrapArgs(o: {
  executable: string;
  zygoteDir: string;
  /** Absent: no writable directory at all (the upload syntax check needs none). */
  tasksDir?: string;
  /**
   * An environment of an element's dependencies, read-only at IN_SANDBOX.env: a fixed path, so
   * tasks never use the data directory's own path (their mount table still shows it,
   * docs/security.md, "Not yet done"), and never under /tmp, which each task's own tmpfs covers
   * (docs/script-dependencies.md).
   */
  envDir?: string;
  network: boolean;
  /**
   * The zygote: its children unshare the namespaces of `taskNamespaces` (CAP_SYS_ADMIN) and bring
   * up their own loopback (CAP_NET_ADMIN); its death kills them (CAP_KILL). It runs no tenant code, and a child loses every
   * capability when it switches to its task uid, before it reads its task.
   */
  zygote?: boolean;
}): string[] {
  const args = systemMounts(o.executable);
  if (o.zygote && isRoot()) {
    // CAP_KILL: the parent-death signal that ends a task when the zygote dies (a crashed
    // service) is sent with the dying zygote's rights; without it the kernel drops the signal
    // for a task of another uid and the task outlives the service (docs/security.md).
    args.push("--cap-add", "CAP_SYS_ADMIN", "--cap-add", "CAP_KILL");
    if (!o.network) args.push("--cap-add", "CAP_NET_ADMIN");
  }
  // bwrap would make the mount points' parent 0700: task uids must reach an environment there.
  args.push("--perms", "0755", "--dir", path.dirname(IN_SANDBOX.zygote));
  args.push("--ro-bind", o.zygoteDir, IN_SANDBOX.zygote);
  if (o.tasksDir !== undefined) args.push("--bind", o.tasksDir, IN_SANDBOX.tasks);
  if (o.envDir !== undefined) args.push("--ro-bind", o.envDir, IN_SANDBOX.env);
  if (!o.network) args.push("--unshare-net");
  args.push("--chdir", "/");
  return args;
}

/**
 * The zygote's arguments after zygote.py (docs/security.md, "Layers"); `tasksDir`: where it sees
 * working directories when not in bubblewrap.
 */
export function zygoteArgs(python: Config["python"], strict: boolean, tasksDir?: string): string[] {
  return [
    `--ns=${taskNamespaces(python.network).join(",")}`,
    `--disk=${python.diskBytes}`,
    ...(tasksDir !== undefined ? [`--tasks=${tasksDir}`] : []),
    ...(strict ? ["--strict"] : []),
  ];
}

/**
 * Starts the zygote in bubblewrap as the runner will, but with `--probe`: it checks that its
 * children can have namespaces of their own and that user namespaces can be denied to them.
 */
function bwrapWorks(python: Config["python"], extra: string[] = []): string | undefined {
  const { bwrap } = python;
  if (!existsSync(bwrap)) return `${bwrap} not found`;
  let r = probe(python, extra);
  // A machine busy with other start-ups once took longer than the limit: asked once more, so
  // that a slow moment does not leave the service refusing every task until it restarts.
  if ((r.error as NodeJS.ErrnoException | undefined)?.code === "ETIMEDOUT")
    r = probe(python, extra);
  if (r.status === 0) return undefined;
  return (r.stderr || r.error?.message || `${bwrap} exited ${r.status ?? r.signal}`).trim();
}

function probe(python: Config["python"], extra: string[]) {
  const { bwrap, executable, network } = python;
  return spawnSync(
    bwrap,
    [
      ...bwrapArgs({ executable, zygoteDir: ZYGOTE_DIR, network, zygote: true }),
      executable,
      "-I",
      "-B",
      `${IN_SANDBOX.zygote}/zygote.py`,
      ...zygoteArgs(python, true),
      ...extra,
      "--probe",
    ],
    { encoding: "utf8", timeout: 20_000, env: { PATH: "/usr/bin:/bin" } },
  );
}

/**
 * Why a zygote cannot have a user namespace of its own mapping `slice` (docs/security.md,
 * "Preloading"), or undefined when it can. Asked once at start-up, of a zygote that imports
 * nothing: a preloading zygote that fails later may have been ended by its packages' code.
 */
export function userNamespaceRefused(
  python: Config["python"],
  slice: { outer: number; base: number; count: number },
): string | undefined {
  return bwrapWorks(python, [`--userns=${slice.outer},${slice.base},${slice.count}`]);
}

export interface SandboxChoice {
  kind: SandboxKind;
  /** Set when `kind` is `refused`: why, and what the operator can do (the task error message). */
  refusal?: string;
}

/**
 * Which isolation python tasks get (docs/script-service.md, "Limits and isolation"). `auto` uses
 * bubblewrap and, when it is missing or does not work, refuses every task rather than run it with
 * less isolation than the operator expects: weaker isolation is only ever chosen explicitly, with
 * SCRIPT_SANDBOX=none. `bwrap` makes a missing bubblewrap a start-up error.
 */
export function detectSandbox(python: Config["python"], logger: Logger): SandboxChoice {
  if (python.sandbox !== "none") {
    const problem = bwrapWorks(python);
    if (!problem) {
      logger.info({ sandbox: "bwrap" }, "python tasks run inside bubblewrap");
      return { kind: "bwrap" };
    }
    if (python.sandbox === "bwrap") {
      throw new Error(`SCRIPT_SANDBOX=bwrap but bubblewrap does not work: ${problem}`);
    }
    const refusal =
      `script tasks are refused: bubblewrap, the script sandbox, does not work on this node (${problem}). ` +
      "Install it (as root: `apt-get install bubblewrap python3-seccomp`; in a container, also allow " +
      "it to create namespaces) and restart, or set SCRIPT_SANDBOX=none " +
      "to accept running scripts isolated by a per-task uid and rlimits only";
    logger.error({ sandbox: "refused", problem }, refusal);
    return { kind: "refused", refusal };
  }
  if (isRoot()) {
    logger.warn(
      { sandbox: "uid" },
      "SCRIPT_SANDBOX=none: python tasks isolated by per-task uid and rlimits only",
    );
    return { kind: "uid" };
  }
  logger.warn(
    { sandbox: "none" },
    "SCRIPT_SANDBOX=none and not running as root: python tasks share the service's uid (rlimits only)",
  );
  return { kind: "none" };
}
