import { type CgroupLimits, type CgroupVersion, findCgroupFs, PARENT } from "./cgroup-fs.ts";
import type { Logger } from "./python-runner-sandbox.ts";

let probes = 0;

/**
 * Whether tasks can have cgroups here: creates (and removes) one with the task limits. Returns
 * the version, or why not (docs/security.md).
 */
export function probeCgroups(
  mountRoot: string,
  limits: CgroupLimits,
): { version: CgroupVersion } | { problem: string } {
  const found = findCgroupFs(mountRoot, PARENT);
  if ("problem" in found) return found;
  const cg = found.fs;
  const name = `probe-${process.pid}-${++probes}`;
  try {
    cg.createParent();
    cg.create(name, limits);
    return { version: cg.version };
  } catch (err) {
    const e = err as NodeJS.ErrnoException;
    const hint =
      e.code === "EROFS"
        ? " (read-only: in a container, mount the cgroup file system read-write)"
        : e.code === "EACCES" || e.code === "EPERM"
          ? " (the service must run as root)"
          : "";
    return { problem: `cannot create a cgroup (cgroup ${cg.version}): ${e.message}${hint}` };
  } finally {
    try {
      cg.remove(name);
    } catch {
      // never created
    }
  }
}

export interface CgroupChoice {
  kind: "v2" | "v1" | "off" | "refused";
  /** With `refused`: why, and what the operator can do (the task error message). */
  refusal?: string;
}

/**
 * Whether tasks get a cgroup each (docs/security.md, "One cgroup per task"). `auto` refuses every
 * task where none can be created, rather than run it with less isolation than the operator
 * expects: weaker isolation is only ever chosen explicitly, with SCRIPT_CGROUP=off. `required`
 * makes it a start-up error.
 */
export function chooseCgroups(
  python: { cgroup: "auto" | "required" | "off"; cgroupRoot: string } & CgroupLimits,
  logger: Logger,
): CgroupChoice {
  if (python.cgroup === "off") {
    logger.warn(
      { cgroup: "off" },
      "SCRIPT_CGROUP=off: python tasks have no cgroup: memory is limited per process only",
    );
    return { kind: "off" };
  }
  const probe = probeCgroups(python.cgroupRoot, python);
  if ("version" in probe) {
    logger.info({ cgroup: probe.version }, "each python task runs in a cgroup of its own");
    return { kind: probe.version };
  }
  if (python.cgroup === "required") throw new Error(`SCRIPT_CGROUP=required but ${probe.problem}`);
  const refusal =
    `script tasks are refused: tasks cannot have a cgroup of their own on this node (${probe.problem}), ` +
    "which holds a task's processes to SCRIPT_MEMORY_BYTES and SCRIPT_PROCESSES together. Run the " +
    "service as root where cgroup v2 (memory and pids controllers) or the cgroup v1 memory, pids " +
    "and freezer hierarchies are mounted read-write, and restart, or set SCRIPT_CGROUP=off to " +
    "accept per-process limits only (a task may then use SCRIPT_PROCESSES × SCRIPT_MEMORY_BYTES)";
  logger.error({ cgroup: "refused", problem: probe.problem }, refusal);
  return { kind: "refused", refusal };
}
