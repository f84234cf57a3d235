import { createHash, randomBytes } from "node:crypto";
import {
  chmod,
  lstat,
  mkdir,
  mkdtemp,
  readdir,
  readFile,
  rename,
  rm,
  stat,
  writeFile,
} from "node:fs/promises";
import path from "node:path";
import type { Clock } from "../clock.ts";
import type { EnvsConfig } from "../config-python.ts";
import type { ScriptEnv } from "../store/revision-types.ts";
import { runBounded } from "./bounded-process.ts";
import { installedDists, preloadModules } from "./env-dists.ts";

export interface EnvBuildDeps {
  /** The task interpreter (PYTHON): its own venv and pip build every environment. */
  python: string;
  envs: EnvsConfig;
  /** `DATA_DIR/envs`. */
  root: string;
  clock: Clock;
}

/** What the runner reads of a built environment (its `sluice-env.json`). */
export interface EnvManifest extends ScriptEnv {
  /** Imported by its zygote before it forks (docs/script-dependencies.md, "Warm start"). */
  modules: string[];
}

export type Built = { ok: true; env: ScriptEnv; dir: string } | { ok: false; message: string };

export const MANIFEST = "sluice-env.json";
/** pip's output kept per stream: the message of a failed install is its first lines. */
const OUTPUT_BYTES = 64 * 1024;

/**
 * Builds the environment of `requirements` in a temporary directory under `root`, names it by the
 * hash of what pip resolved, and moves it to `root/<hash>` in one rename (an existing one is
 * reused and the new copy dropped). A failure leaves nothing behind.
 */
export async function buildEnv(
  d: EnvBuildDeps,
  requirements: string[],
  declared: string[],
): Promise<Built> {
  await mkdir(d.root, { recursive: true, mode: 0o755 });
  const tmp = await mkdtemp(path.join(d.root, ".build-"));
  const home = await mkdtemp(path.join(d.root, ".home-"));
  try {
    const venv = await step(d, home, [d.python, "-I", "-m", "venv", "--without-pip", tmp], "venv");
    if (venv) return { ok: false, message: venv };
    const pip = await step(d, home, pipInstall(d, tmp, requirements), "pip install");
    if (pip) return { ok: false, message: pip };
    const { site, dists } = await installedDists(tmp);
    const packages = dists.map((x) => `${x.name}==${x.version}`).sort();
    const pyTag = path.basename(path.dirname(site)); // python3.11: part of what an env is
    const hash = createHash("sha256")
      .update(`${pyTag}\n${packages.join("\n")}\n`)
      .digest("hex")
      .slice(0, 32);
    const env: ScriptEnv = { hash, packages, declared };
    const manifest: EnvManifest = { ...env, modules: await preloadModules(site, dists, declared) };
    await writeFile(path.join(tmp, MANIFEST), `${JSON.stringify(manifest)}\n`, { mode: 0o644 });
    // mkdtemp made it 0700, and pip wrote under the service's umask: task uids read the
    // environment (never write it), so every part is made readable, nothing writable but by root.
    await readableTree(tmp);
    const dir = path.join(d.root, hash);
    await settle(d.root, hash, tmp);
    return { ok: true, env, dir };
  } finally {
    await rm(tmp, { recursive: true, force: true });
    await rm(home, { recursive: true, force: true });
  }
}

/** Per directory, the builds of this process that are putting one in place: one at a time. */
const settling = new Map<string, Promise<void>>();

/**
 * Puts a finished build in place at `root/<hash>` (docs/script-dependencies.md, "Caching and
 * removal"). Taken already: built meanwhile (another upload, another process on this data
 * directory), the same set, complete, since a manifest is written before its build is renamed;
 * only one whose manifest is missing is what a removal cut off by a crash left before removals
 * renamed first, and is replaced. A manifest that is there but cannot be read (no descriptor left)
 * is a whole environment's, which zygotes may have bound: left as it is. One at a time per
 * directory in this process: a build that looked while another was replacing the damaged one
 * found no manifest and moved the new one aside too, under the tasks that had started on it.
 */
async function settle(root: string, hash: string, tmp: string): Promise<void> {
  const dir = path.join(root, hash);
  const before = settling.get(dir) ?? Promise.resolve();
  const mine = before.then(async () => {
    if (await moveInto(tmp, dir)) return;
    if (!(await manifestMissing(dir))) return;
    await removeEnv(root, hash);
    await moveInto(tmp, dir);
  });
  const tail = mine.catch(() => {});
  settling.set(dir, tail);
  try {
    await mine;
  } finally {
    if (settling.get(dir) === tail) settling.delete(dir);
  }
}

/**
 * Whether `dir` has no manifest: only its absence says so (lstat takes no descriptor; any other
 * error is not a damaged environment). `dir` itself gone meanwhile answers true too: the removal
 * then finds nothing to move aside, and the build is renamed in.
 */
async function manifestMissing(dir: string): Promise<boolean> {
  try {
    await lstat(path.join(dir, MANIFEST));
    return false;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === "ENOENT";
  }
}

/** Renames `from` to `to`; false when `to` is already there (not empty). */
async function moveInto(from: string, to: string): Promise<boolean> {
  try {
    await rename(from, to);
    return true;
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    if (code !== "ENOTEMPTY" && code !== "EEXIST") throw err;
    return false;
  }
}

/**
 * Wheels only (`--only-binary=:all:`): installing a wheel unpacks files and runs no code of the
 * package, while building an sdist runs its setup.py here, outside the task sandbox. `--isolated`:
 * pip reads no configuration file and none of the environment's PIP_* variables, so the index
 * settings are exactly the service's.
 */
function pipInstall(d: EnvBuildDeps, venv: string, requirements: string[]): string[] {
  const e = d.envs;
  const index: string[] = [];
  if (e.noIndex) index.push("--no-index");
  else if (e.indexUrl) index.push("--index-url", e.indexUrl);
  for (const u of e.extraIndexUrls) index.push("--extra-index-url", u);
  for (const f of e.findLinks) index.push("--find-links", f);
  for (const h of e.trustedHosts) index.push("--trusted-host", h);
  return [
    d.python,
    "-I",
    "-m",
    "pip",
    "--python",
    path.join(venv, "bin", "python"),
    "install",
    "--isolated",
    "--no-input",
    "--disable-pip-version-check",
    "--no-cache-dir",
    "--no-warn-script-location",
    "--progress-bar",
    "off",
    "--only-binary=:all:",
    ...index,
    "--",
    ...requirements,
  ];
}

/** Runs one step of a build; its error message, or undefined when it succeeded. */
async function step(
  d: EnvBuildDeps,
  home: string,
  argv: string[],
  what: string,
): Promise<string | undefined> {
  const [command, ...args] = argv as [string, ...string[]];
  const r = await runBounded(command, args, {
    // Never the service's own environment (its secrets): only what pip needs.
    env: { PATH: "/usr/bin:/bin", LANG: "C.UTF-8", HOME: home },
    cwd: home,
    timeoutMs: d.envs.buildTimeoutMs,
    outputBytes: OUTPUT_BYTES,
    clock: d.clock,
  });
  if (r.error) return `${what} could not start: ${r.error}`;
  if (r.timedOut) return `${what} took longer than ${d.envs.buildTimeoutMs} ms and was stopped`;
  if (r.code === 0) return undefined;
  return `${what} failed: ${firstLines(r.stderr || r.stdout)}`;
}

/** pip's ERROR lines when it wrote some, else its first lines; at most 1000 characters. */
export function firstLines(text: string): string {
  const lines = text
    .split("\n")
    .map((l) => l.trimEnd())
    .filter((l) => l !== "");
  const errors = lines.filter((l) => l.startsWith("ERROR:"));
  const chosen = (errors.length > 0 ? errors : lines).slice(0, 6).join("\n");
  return chosen.length > 1000 ? `${chosen.slice(0, 1000)}…` : chosen || "no message";
}

/** The manifest of a built environment, or undefined when it is not (complete) on this node. */
export async function readManifest(dir: string): Promise<EnvManifest | undefined> {
  try {
    return JSON.parse(await readFile(path.join(dir, MANIFEST), "utf8")) as EnvManifest;
  } catch {
    return undefined;
  }
}

/** The environments present under `root` (hash-named directories). */
export async function listEnvs(root: string): Promise<string[]> {
  try {
    return (await readdir(root)).filter((n) => /^[0-9a-f]{32}$/.test(n));
  } catch {
    return [];
  }
}

/**
 * Removes an environment (docs/script-dependencies.md, "Caching and removal"): first moved out of
 * its name in one rename, then deleted. A crash in the middle leaves a `.gone-` folder for the next
 * pass, never a hash-named one half deleted that a build would take for complete.
 */
export async function removeEnv(root: string, hash: string): Promise<void> {
  const doomed = path.join(root, `.gone-${hash}-${randomBytes(4).toString("hex")}`);
  try {
    await rename(path.join(root, hash), doomed);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === "ENOENT") return; // removed meanwhile
    throw err;
  }
  await rm(doomed, { recursive: true, force: true });
}

/**
 * Removes build and home folders that no build can still be using: older than `olderThanMs` (a
 * build's steps each stop at their time limit, so twice that is past any live build). A build cut
 * off by a crash leaves them; an upload's own failure removes its own (docs/script-dependencies.md).
 * A removal cut off by a crash leaves a `.gone-` folder, which nothing uses: removed at any age.
 */
export async function removeStaleBuilds(
  root: string,
  now: number,
  olderThanMs: number,
): Promise<string[]> {
  let names: string[];
  try {
    names = (await readdir(root)).filter((n) => /^\.(build|home|gone)-/.test(n));
  } catch {
    return [];
  }
  const gone: string[] = [];
  for (const name of names) {
    const p = path.join(root, name);
    const st = await stat(p).catch(() => undefined);
    if (!st || (!name.startsWith(".gone-") && now - st.mtimeMs < olderThanMs)) continue;
    await rm(p, { recursive: true, force: true });
    gone.push(name);
  }
  return gone;
}

/** Directories 0755, files 0644 (0755 when executable); links left as they are. */
async function readableTree(dir: string): Promise<void> {
  await chmod(dir, 0o755);
  for (const e of await readdir(dir, { withFileTypes: true })) {
    const p = path.join(dir, e.name);
    if (e.isDirectory()) await readableTree(p);
    else if (e.isFile()) await chmod(p, ((await stat(p)).mode & 0o100) !== 0 ? 0o755 : 0o644);
  }
}
