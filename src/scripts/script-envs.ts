import path from "node:path";
import type { Clock } from "../clock.ts";
import type { EnvsConfig } from "../config-python.ts";
import type { ScriptEnvStore } from "../store/kysely-script-envs.ts";
import type { ScriptEnv } from "../store/revision-types.ts";
import {
  type Built,
  buildEnv,
  type EnvManifest,
  listEnvs,
  readManifest,
  removeEnv,
  removeStaleBuilds,
} from "./env-build.ts";
import type { Logger } from "./python-runner-sandbox.ts";

export type Ready =
  | { ok: true; dir: string; manifest: EnvManifest }
  | { ok: false; message: string };

/**
 * Environments of elements' dependencies on this node (docs/script-dependencies.md): built at
 * upload, rebuilt from a version's resolved set where a task needs one that is missing here, and
 * removed once nothing uses them.
 */
export interface ScriptEnvs {
  /** `DATA_DIR/envs`. */
  readonly root: string;
  /** Resolves and installs `requirements` (an upload); the environment is held until `release`. */
  build(requirements: string[], declared: string[]): Promise<Built & { release(): void }>;
  /** The environment's directory here, built from its resolved set first if it is missing. */
  ensure(env: ScriptEnv): Promise<Ready>;
  /** Removes the environments `store` says nothing uses and this process does not hold. */
  collect(store: ScriptEnvStore): Promise<string[]>;
  /** Told of each removed environment (the runner stops its zygote). */
  onRemoved(fn: (hash: string) => void): void;
  /** Held while a task of this process runs in it: never removed under it. */
  hold(hash: string): () => void;
}

export function createScriptEnvs(deps: {
  python: string;
  envs: EnvsConfig;
  dataDir: string;
  clock: Clock;
  logger: Logger;
}): ScriptEnvs {
  const root = path.join(deps.dataDir, "envs");
  const build = { python: deps.python, envs: deps.envs, root, clock: deps.clock };
  /** One build at a time per requirement set (uploads) and per hash (rebuilds) on this node. */
  const building = new Map<string, Promise<Built>>();
  const ready = new Map<string, EnvManifest>();
  const held = new Map<string, number>();
  const removed: Array<(hash: string) => void> = [];

  const hold = (hash: string) => {
    held.set(hash, (held.get(hash) ?? 0) + 1);
    let done = false;
    return () => {
      if (done) return;
      done = true;
      const n = (held.get(hash) ?? 1) - 1;
      if (n > 0) held.set(hash, n);
      else held.delete(hash);
    };
  };

  const once = (key: string, make: () => Promise<Built>): Promise<Built> => {
    const running = building.get(key);
    if (running) return running;
    const p = make().finally(() => building.delete(key));
    building.set(key, p);
    return p;
  };

  async function ensure(env: ScriptEnv): Promise<Ready> {
    const dir = path.join(root, env.hash);
    const known = ready.get(env.hash);
    if (known) return { ok: true, dir, manifest: known };
    let manifest = await readManifest(dir);
    if (!manifest) {
      deps.logger.info({ env: env.hash }, "building a missing environment from its resolved set");
      const built = await once(`hash:${env.hash}`, () =>
        buildEnv(build, env.packages, env.declared),
      );
      if (!built.ok)
        return { ok: false, message: `its environment could not be built here: ${built.message}` };
      if (built.env.hash !== env.hash)
        return {
          ok: false,
          message: `its environment resolved to ${built.env.hash} on this node, not ${env.hash} (each node must run the same Python)`,
        };
      manifest = await readManifest(dir);
      if (!manifest) return { ok: false, message: `its environment ${env.hash} vanished` };
    }
    ready.set(env.hash, manifest);
    return { ok: true, dir, manifest };
  }

  return {
    root,
    async build(requirements, declared) {
      const key = `reqs:${[...requirements].sort().join("\n")}`;
      const built = await once(key, () => buildEnv(build, requirements, declared));
      // Held from here to the commit of the version that uses it: a clean-up in between (another
      // upload's) must not remove it.
      const release = built.ok ? hold(built.env.hash) : () => {};
      return { ...built, release };
    },
    ensure,
    hold,
    onRemoved: (fn) => void removed.push(fn),
    async collect(store) {
      const stale = await removeStaleBuilds(root, deps.clock.now(), 2 * deps.envs.buildTimeoutMs);
      if (stale.length > 0) deps.logger.info({ stale }, "removed builds a crash left behind");
      const present = await listEnvs(root);
      if (present.length === 0) return [];
      const used = await store.envHashesInUse();
      const gone: string[] = [];
      for (const hash of present) {
        if (used.has(hash) || held.has(hash) || building.has(`hash:${hash}`)) continue;
        ready.delete(hash);
        await removeEnv(root, hash);
        gone.push(hash);
        for (const fn of removed) fn(hash);
      }
      if (gone.length > 0) deps.logger.info({ envs: gone }, "removed environments no element uses");
      return gone;
    },
  };
}
