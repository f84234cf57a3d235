import type { EnvManifest } from "./env-build.ts";
import type { Logger } from "./python-runner-sandbox.ts";
import type { ZygotePool } from "./python-runner-zygote.ts";
import type { UidSlice, UidSlices } from "./uid-slices.ts";

interface Started {
  pool: ZygotePool;
  /** Set when the zygote preloads, in a user namespace that maps this slice only. */
  slice: UidSlice | undefined;
}

interface Entry {
  started: Promise<Started>;
  /** Tasks holding it, from their child's take to their sweep. */
  busy: number;
  /** Recency: the runner's task counter when it was last taken. */
  used: number;
}

export interface EnvLease {
  pool: ZygotePool;
  /** The uids its tasks take (its slice's), or undefined: the runner's own. */
  uids: { base: number; count: number } | undefined;
  /**
   * Keeps the zygote (and so its slice) from being stopped until the function it returns is
   * called: while a shared directory whose group is a uid of its slice lives.
   */
  hold(): () => void;
  release(): void;
}

/**
 * The zygotes of environments (docs/script-dependencies.md, "Warm start"): one per environment
 * and kind, started on a task's demand, at most `max` at once on top of the default zygote. A
 * preloading zygote imports the environment's declared modules in a user namespace mapping a
 * uid slice of its own (docs/security.md, "Preloading"); a plain one imports nothing and runs
 * the tasks whose shared working directory is in use with a group outside the slice, and every
 * task of its environment when it started with no slice free or its preloading start failed.
 * When a new one is needed at the limit, the least recently used one that no task holds is
 * stopped; when every one is held, the new one starts anyway and the count comes back to the
 * limit as tasks end.
 */
export interface EnvPoolsOptions {
  max: number;
  /** Starts a zygote; an abort of `signal` (at close) stops it even before it is ready. */
  start: (
    dir: string,
    manifest: EnvManifest,
    slice: UidSlice | undefined,
    signal: AbortSignal,
  ) => Promise<ZygotePool>;
  /** Undefined: no zygote preloads (off, or the kernel refuses user namespaces). */
  slices: UidSlices | undefined;
  /** After a preloading zygote stopped, before its slice serves another: kill what it left. */
  retire: (slice: UidSlice) => void;
  logger: Logger;
}

export class EnvPools {
  readonly #o: EnvPoolsOptions;
  readonly #entries = new Map<string, Entry>();
  /** Zygotes being stopped: each gives its slice back when done. */
  readonly #stopping = new Set<Promise<void>>();
  #clock = 0;
  readonly #closing = new AbortController();

  constructor(o: EnvPoolsOptions) {
    this.#o = o;
  }

  get size(): number {
    return this.#entries.size;
  }

  /** `preload`: false for a task whose shared directory is in use with a group of another range. */
  async acquire(dir: string, manifest: EnvManifest, preload: boolean): Promise<EnvLease> {
    const warm = preload && this.#o.slices !== undefined;
    const e = this.#entry(dir, manifest, warm);
    e.busy++;
    e.used = ++this.#clock;
    const hold = () => {
      let released = false;
      return () => {
        if (released) return;
        released = true;
        e.busy--;
        this.#evict(this.#o.max);
      };
    };
    const release = hold();
    try {
      const { pool, slice } = await e.started;
      const uids = slice && { base: slice.base, count: slice.count };
      return {
        pool,
        uids,
        hold: () => {
          e.busy++;
          return hold();
        },
        release,
      };
    } catch (err) {
      release();
      throw err;
    }
  }

  #entry(dir: string, manifest: EnvManifest, preload: boolean): Entry {
    const key = preload ? manifest.hash : `${manifest.hash} plain`;
    const known = this.#entries.get(key);
    if (known) return known;
    this.#evict(this.#o.max - 1);
    const e: Entry = { started: this.#launch(dir, manifest, preload), busy: 0, used: 0 };
    this.#entries.set(key, e);
    e.started.catch(() => {
      if (this.#entries.get(key) === e) this.#entries.delete(key);
    });
    return e;
  }

  /** Starts a zygote: preloading when asked and a slice is (or, once a stop ends, gets) free. */
  async #launch(dir: string, manifest: EnvManifest, preload: boolean): Promise<Started> {
    const signal = this.#closing.signal;
    const slice = preload ? await this.#freeSlice() : undefined;
    if (!slice) return { pool: await this.#o.start(dir, manifest, undefined, signal), slice };
    try {
      return { pool: await this.#o.start(dir, manifest, slice, signal), slice };
    } catch (err) {
      this.#giveBack(slice);
      if (signal.aborted) throw err;
      // The user namespace was had at start-up: its packages' import-time code may have ended it,
      // which must not stop other environments preloading. This one's tasks import them instead.
      this.#o.logger.warn(
        { err, env: manifest.hash },
        "an environment's zygote failed to start preloading: its tasks run on one that does not",
      );
      return { pool: await this.#o.start(dir, manifest, undefined, signal), slice: undefined };
    }
  }

  /** A free slice, waiting for zygotes being stopped to give theirs back; none: every one serves. */
  async #freeSlice(): Promise<UidSlice | undefined> {
    for (;;) {
      const slice = this.#o.slices?.take();
      if (slice || this.#stopping.size === 0) return slice;
      await Promise.race(this.#stopping);
    }
  }

  #giveBack(slice: UidSlice): void {
    this.#o.retire(slice);
    this.#o.slices?.give(slice);
  }

  #stop(e: Entry): Promise<void> {
    const stopped = e.started
      .then(async ({ pool, slice }) => {
        await pool.close().catch(() => {});
        if (slice) this.#giveBack(slice);
      })
      .catch(() => {}) // never started: nothing to stop, its slice went back then
      .finally(() => this.#stopping.delete(stopped));
    this.#stopping.add(stopped);
    return stopped;
  }

  /** Stops idle zygotes, least recently used first, until at most `keep` remain. */
  #evict(keep: number): void {
    const idle = [...this.#entries]
      .filter(([, e]) => e.busy === 0)
      .sort((a, b) => a[1].used - b[1].used);
    let over = this.#entries.size - keep;
    for (const [key, e] of idle) {
      if (over <= 0) break;
      this.#entries.delete(key);
      over--;
      void this.#stop(e);
      this.#o.logger.info(
        { env: key },
        "stopped the zygote of an environment (least recently used)",
      );
    }
  }

  /** The environment was removed from this node: its zygotes go once no task holds them. */
  forget(hash: string): void {
    for (const key of [hash, `${hash} plain`]) {
      const e = this.#entries.get(key);
      if (!e || e.busy > 0) continue;
      this.#entries.delete(key);
      void this.#stop(e);
    }
  }

  async close(): Promise<void> {
    this.#closing.abort();
    const all = [...this.#entries.values()];
    this.#entries.clear();
    await Promise.all([...all.map((e) => this.#stop(e)), ...this.#stopping]);
  }
}
