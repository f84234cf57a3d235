import type { EnvManifest } from "./env-build.ts";
import type { Logger } from "./python-runner-sandbox.ts";
import type { ZygotePool } from "./python-runner-zygote.ts";

interface Entry {
  pool: Promise<ZygotePool>;
  /** Tasks holding it, from their child's take to their sweep. */
  busy: number;
  /** Recency: the runner's task counter when it was last taken. */
  used: number;
}

export interface EnvLease {
  pool: ZygotePool;
  release(): void;
}

/**
 * The zygotes of environments (docs/script-dependencies.md, "Warm start"): one per environment,
 * started on a task's demand with the environment's python and its declared modules imported, at
 * most `max` at once on top of the default zygote. When a new one is needed at the limit, the
 * least recently used one that no task holds is stopped; when every one is held, the new one
 * starts anyway and the count comes back to the limit as tasks end.
 */
export interface EnvPoolsOptions {
  max: number;
  start: (dir: string, manifest: EnvManifest) => Promise<ZygotePool>;
  logger: Logger;
}

export class EnvPools {
  readonly #o: EnvPoolsOptions;
  readonly #entries = new Map<string, Entry>();
  #clock = 0;

  constructor(o: EnvPoolsOptions) {
    this.#o = o;
  }

  get size(): number {
    return this.#entries.size;
  }

  async acquire(dir: string, manifest: EnvManifest): Promise<EnvLease> {
    let e = this.#entries.get(manifest.hash);
    if (!e) {
      this.#evict(this.#o.max - 1);
      const pool = this.#o.start(dir, manifest);
      e = { pool, busy: 0, used: 0 };
      this.#entries.set(manifest.hash, e);
      const mine = e;
      pool.catch(() => {
        if (this.#entries.get(manifest.hash) === mine) this.#entries.delete(manifest.hash);
      });
    }
    e.busy++;
    e.used = ++this.#clock;
    const held = e;
    let released = false;
    const release = () => {
      if (released) return;
      released = true;
      held.busy--;
      this.#evict(this.#o.max);
    };
    try {
      return { pool: await e.pool, release };
    } catch (err) {
      release();
      throw err;
    }
  }

  /** Stops idle zygotes, least recently used first, until at most `keep` remain. */
  #evict(keep: number): void {
    const idle = [...this.#entries]
      .filter(([, e]) => e.busy === 0)
      .sort((a, b) => a[1].used - b[1].used);
    let over = this.#entries.size - keep;
    for (const [hash, e] of idle) {
      if (over <= 0) break;
      this.#entries.delete(hash);
      over--;
      void e.pool.then((p) => p.close()).catch(() => {});
      this.#o.logger.info(
        { env: hash },
        "stopped the zygote of an environment (least recently used)",
      );
    }
  }

  /** The environment was removed from this node: its zygote goes once no task holds it. */
  forget(hash: string): void {
    const e = this.#entries.get(hash);
    if (!e || e.busy > 0) return;
    this.#entries.delete(hash);
    void e.pool.then((p) => p.close()).catch(() => {});
  }

  async close(): Promise<void> {
    const all = [...this.#entries.values()];
    this.#entries.clear();
    await Promise.all(all.map((e) => e.pool.then((p) => p.close()).catch(() => {})));
  }
}
