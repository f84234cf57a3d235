import type { Run, Store } from "../store/types.ts";

/**
 * The environment a run executed in, as the run detail names it (docs/script-dependencies.md,
 * "Where it is visible"): read from the script version the run recorded, never stored with the
 * run. Versions never change, so the store's version cache answers repeated reads.
 */
export interface RunEnvironment {
  hash: string;
  /** `name==version`, sorted. */
  packages: string[];
}

/** One script version's environment; null when it declared no dependencies (or is gone). */
export async function versionEnvironment(
  store: Pick<Store, "scriptVersion">,
  elementId: string,
  version: number,
): Promise<RunEnvironment | null> {
  const v = await store.scriptVersion(elementId, version);
  return v?.env ? { hash: v.env.hash, packages: [...v.env.packages] } : null;
}

/** A script task's environment (null: none); undefined for a flow run, which names it per node. */
export async function taskEnvironment(
  store: Pick<Store, "scriptVersion">,
  run: Pick<Run, "elementType" | "elementId" | "version">,
): Promise<RunEnvironment | null | undefined> {
  if (run.elementType !== "PY") return undefined;
  const version = Number(run.version);
  // A task accepted before its element had a version records none: it names no environment.
  if (run.version === null || !Number.isSafeInteger(version) || version < 1) return null;
  return versionEnvironment(store, run.elementId, version);
}
