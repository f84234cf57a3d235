import { readdir, readFile } from "node:fs/promises";
import path from "node:path";
import { normalizeName } from "./requirements.ts";

/** One installed distribution of an environment (its `*.dist-info` folder). */
export interface Dist {
  /** Normalized (PEP 503). */
  name: string;
  version: string;
  dir: string;
}

/** The site-packages folder of a venv and what is installed in it, read from the files pip wrote. */
export async function installedDists(venv: string): Promise<{ site: string; dists: Dist[] }> {
  const lib = path.join(venv, "lib");
  const pythons = (await readdir(lib)).filter((n) => /^python3\.\d+$/.test(n));
  if (pythons.length !== 1) throw new Error(`the environment ${venv} has no single python in lib/`);
  const site = path.join(lib, pythons[0] as string, "site-packages");
  const dists: Dist[] = [];
  for (const entry of await readdir(site)) {
    if (!entry.endsWith(".dist-info")) continue;
    const dir = path.join(site, entry);
    const meta = await readFile(path.join(dir, "METADATA"), "utf8").catch(() => "");
    const name = /^Name:\s*(.+)$/m.exec(meta)?.[1]?.trim();
    const version = /^Version:\s*(.+)$/m.exec(meta)?.[1]?.trim();
    if (name && version) dists.push({ name: normalizeName(name), version, dir });
  }
  return { site, dists };
}

const IDENTIFIER = /^[A-Za-z_][A-Za-z0-9_]*$/;

/**
 * The modules a zygote of this environment imports before it forks: those of the declared
 * projects (top_level.txt, else the top-level names in RECORD, else the project name with `-` as
 * `_`). A name that fails to import is skipped by the zygote.
 */
export async function preloadModules(
  _site: string,
  dists: Dist[],
  declared: string[],
): Promise<string[]> {
  const out = new Set<string>();
  for (const name of declared) {
    const dist = dists.find((x) => x.name === name);
    const names = dist ? await topLevel(dist.dir) : [];
    for (const n of names.length > 0 ? names : [name.replace(/-/g, "_")])
      if (IDENTIFIER.test(n)) out.add(n);
  }
  return [...out];
}

async function topLevel(distInfo: string): Promise<string[]> {
  const top = await readFile(path.join(distInfo, "top_level.txt"), "utf8").catch(() => undefined);
  if (top !== undefined)
    return top
      .split("\n")
      .map((l) => l.trim())
      .filter((l) => l !== "");
  const record = await readFile(path.join(distInfo, "RECORD"), "utf8").catch(() => "");
  const names = new Set<string>();
  for (const line of record.split("\n")) {
    const file = line.split(",")[0] ?? "";
    const first = file.split("/")[0] ?? "";
    if (first === "" || first.startsWith("..") || first.endsWith(".dist-info")) continue;
    if (first.endsWith(".data") || first === "__pycache__") continue;
    if (file.includes("/")) names.add(first);
    else if (first.endsWith(".py")) names.add(first.slice(0, -3));
  }
  return [...names];
}
