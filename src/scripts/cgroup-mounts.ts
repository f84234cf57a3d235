import fs from "node:fs";

/**
 * Where the cgroup hierarchies are mounted, read from /proc/self/mountinfo: the cgroup v2 mount
 * and each v1 controller's mount point, for cgroup-fs.ts to choose from.
 */

export interface Mounts {
  v2: string | undefined;
  v1: Map<string, string>;
}

/** Octal escapes of /proc/self/mountinfo (a space is \040). */
const unescapeOctal = (s: string): string =>
  s.replace(/\\([0-7]{3})/g, (_, o: string) => String.fromCharCode(Number.parseInt(o, 8)));

/** The cgroup mounts at or under `under`, from the mount table. */
export function cgroupMounts(under: string): Mounts {
  const mounts: Mounts = { v2: undefined, v1: new Map() };
  let table = "";
  try {
    table = fs.readFileSync("/proc/self/mountinfo", "utf8");
  } catch {
    return mounts;
  }
  for (const line of table.split("\n")) {
    const f = line.split(" ");
    const sep = f.indexOf("-");
    const point = unescapeOctal(f[4] ?? "");
    if (sep < 0 || (point !== under && !point.startsWith(`${under}/`))) continue;
    const type = f[sep + 1];
    if (type === "cgroup2") mounts.v2 ??= point;
    else if (type === "cgroup")
      for (const opt of (f[sep + 3] ?? "").split(","))
        if (!mounts.v1.has(opt)) mounts.v1.set(opt, point);
  }
  return mounts;
}
