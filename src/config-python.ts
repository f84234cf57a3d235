import path from "node:path";
import { bool, type Env, int, MiB } from "./config-limits.ts";
import { StartupError } from "./errors.ts";

/** Python tasks and their sandbox: the settings' type and reading (out of config.ts). */
export interface PythonConfig {
  executable: string;
  concurrency: number;
  prefork: number;
  memoryBytes: number;
  openFiles: number;
  processes: number;
  fileSizeBytes: number;
  /** Size of each tmpfs a task writes into: its own working directory and its /tmp. */
  diskBytes: number;
  network: boolean;
  /** `auto`: bubblewrap, or refuse tasks without it; `bwrap`: required; `none`: uid + rlimits. */
  sandbox: "auto" | "bwrap" | "none";
  /** The bubblewrap executable (absolute path). */
  bwrap: string;
  /**
   * `auto`: a cgroup per task, or refuse tasks without one; `required`: without one the service
   * does not start; `off`: per-process rlimits only (docs/security.md).
   */
  cgroup: "auto" | "required" | "off";
  /** Where the cgroup file systems are mounted (the runner uses those at or under it). */
  cgroupRoot: string;
  uidBase: number;
  uidCount: number;
  /** Elements' own dependencies (docs/script-dependencies.md). */
  envs: EnvsConfig;
  /** The syntax check of uploaded and inline Python (docs/script-service.md, "Upload"). */
  check: {
    /** Largest .py file (or inline code) checked; larger is refused unread. */
    fileBytes: number;
    /** One check (one process, all the .py files of one upload item) is killed after this. */
    timeoutMs: number;
    /** Check processes at once; further checks wait in FIFO order. */
    concurrency: number;
  };
}

/** Where pip finds packages, and how environments are built and kept (docs/script-dependencies.md). */
export interface EnvsConfig {
  /** PIP_INDEX_URL; absent: pip's default (PyPI) unless `noIndex`. */
  indexUrl: string | undefined;
  extraIndexUrls: string[];
  findLinks: string[];
  trustedHosts: string[];
  /** PIP_NO_INDEX: only `findLinks` folders or pages, no index at all. */
  noIndex: boolean;
  /** One environment's build (venv, install, listing) is killed after this. */
  buildTimeoutMs: number;
  /** Zygotes of environments running at once on a node; the least recently used stops first. */
  zygotes: number;
  /** How often unused environments are removed (also after every upload). */
  gcMs: number;
  /**
   * SCRIPT_ENV_PRELOAD (on by default): an environment's zygote imports the declared packages
   * before it forks, inside bubblewrap and a user namespace of its own that maps only its tasks'
   * uids, so their import-time code has no rights outside it (docs/security.md, "Preloading").
   */
  preload: boolean;
  /**
   * SCRIPT_ENV_START_TIMEOUT_MS: an environment's zygote process not ready within this is killed;
   * one that preloads is replaced by one that does not (docs/script-dependencies.md).
   */
  startTimeoutMs: number;
}

const list = (raw: string | undefined): string[] =>
  (raw ?? "").split(/[\s,]+/).filter((s) => s !== "");

function envsConfigOf(env: Env): EnvsConfig {
  return {
    indexUrl: env.PIP_INDEX_URL || undefined,
    extraIndexUrls: list(env.PIP_EXTRA_INDEX_URL),
    findLinks: list(env.PIP_FIND_LINKS),
    trustedHosts: list(env.PIP_TRUSTED_HOST),
    noIndex: bool(env, "PIP_NO_INDEX", false),
    buildTimeoutMs: int(env, "SCRIPT_ENV_BUILD_TIMEOUT_MS", 300_000),
    zygotes: Math.max(1, int(env, "SCRIPT_ENV_ZYGOTES", 4)),
    gcMs: Math.max(1000, int(env, "SCRIPT_ENV_GC_MS", 3_600_000)),
    preload: bool(env, "SCRIPT_ENV_PRELOAD", true),
    startTimeoutMs: Math.max(100, int(env, "SCRIPT_ENV_START_TIMEOUT_MS", 60_000)),
  };
}

/** Python tasks and their sandbox (docs/script-service.md, docs/security.md). */
export function pythonConfig(env: Env): PythonConfig {
  const sandbox = env.SCRIPT_SANDBOX ?? "auto";
  if (sandbox !== "auto" && sandbox !== "bwrap" && sandbox !== "none") {
    throw new StartupError(`config: SCRIPT_SANDBOX must be auto, bwrap or none, got "${sandbox}"`);
  }
  const bwrap = env.SCRIPT_BWRAP || "/usr/bin/bwrap";
  if (!path.isAbsolute(bwrap)) {
    throw new StartupError(`config: SCRIPT_BWRAP must be an absolute path, got "${bwrap}"`);
  }
  const cgroup = env.SCRIPT_CGROUP || "auto";
  if (cgroup !== "auto" && cgroup !== "required" && cgroup !== "off") {
    throw new StartupError(`config: SCRIPT_CGROUP must be auto, required or off, got "${cgroup}"`);
  }
  const cgroupRoot = env.SCRIPT_CGROUP_ROOT || "/sys/fs/cgroup";
  if (!path.isAbsolute(cgroupRoot)) {
    throw new StartupError(
      `config: SCRIPT_CGROUP_ROOT must be an absolute path, got "${cgroupRoot}"`,
    );
  }
  const checkConcurrency = int(env, "SCRIPT_CHECK_CONCURRENCY", 2);
  // Each concurrent check holds a sandbox uid of its own, one of the last of the runner's block.
  if (!Number.isInteger(checkConcurrency) || checkConcurrency < 1 || checkConcurrency > 64) {
    throw new StartupError(
      `config: SCRIPT_CHECK_CONCURRENCY must be an integer from 1 to 64, got "${checkConcurrency}"`,
    );
  }
  const diskBytes = int(env, "SCRIPT_DISK_BYTES", 256 * MiB);
  if (!Number.isSafeInteger(diskBytes) || diskBytes < 0) {
    throw new StartupError(
      `config: SCRIPT_DISK_BYTES must be a whole number of bytes, got "${diskBytes}"`,
    );
  }
  return {
    executable: env.PYTHON ?? "/usr/bin/python3",
    concurrency: int(env, "SCRIPT_CONCURRENCY", 64),
    prefork: int(env, "SCRIPT_PREFORK", 8),
    memoryBytes: int(env, "SCRIPT_MEMORY_BYTES", 1024 * MiB),
    openFiles: int(env, "SCRIPT_OPEN_FILES", 1024),
    processes: int(env, "SCRIPT_PROCESSES", 64),
    fileSizeBytes: int(env, "SCRIPT_FILE_SIZE_BYTES", 256 * MiB),
    diskBytes,
    network: bool(env, "SCRIPT_NETWORK", false),
    sandbox,
    bwrap,
    cgroup,
    cgroupRoot,
    uidBase: int(env, "SCRIPT_UID_BASE", 200000),
    uidCount: int(env, "SCRIPT_UID_COUNT", 16384),
    envs: envsConfigOf(env),
    check: {
      fileBytes: int(env, "LIMIT_PY_FILE_BYTES", MiB),
      timeoutMs: int(env, "SCRIPT_CHECK_TIMEOUT_MS", 10_000),
      concurrency: checkConcurrency,
    },
  };
}
