import type { Clock } from "../clock.ts";
import type { ArtifactStore } from "../store/kysely-artifacts.ts";
import type { Store } from "../store/types.ts";
import { type ArtifactLimits, collectFiles } from "./collect.ts";
import { type NodeFiles, trackNodeFiles } from "./node-files.ts";

/**
 * Keeps the files of runs that keep them (docs/artifacts.md): after the run's end is recorded,
 * on the node that executed it, its working directory is collected into the shared database.
 */
export interface ArtifactKeeper {
  /** Attributes the files of `dir` to the script nodes that wrote them, as each ends. */
  track(dir: string): NodeFiles;
  /** Collects `dir` into the run's artifacts; never throws (a failure is recorded as such). */
  collect(runId: string, dir: string, nodes?: NodeFiles): Promise<void>;
  /** Told after a run's artifact set is written (tests, and nothing else, wait on it). */
  onSaved(listener: (runId: string) => void): void;
}

export function createArtifactKeeper(deps: {
  store: ArtifactStore;
  runs: Pick<Store, "getRun">;
  clock: Clock;
  logger: { error(obj: unknown, msg?: string): void };
  limits: ArtifactLimits;
}): ArtifactKeeper {
  const { store, clock, limits } = deps;
  const listeners: ((runId: string) => void)[] = [];

  async function save(runId: string, dir: string, nodes: NodeFiles | undefined): Promise<void> {
    const createdAt = clock.now();
    const found = await collectFiles(dir, limits, (f) =>
      store.putFile(
        {
          runId,
          nodeId: nodes?.nodeOf(f.name) ?? null,
          name: f.name,
          size: f.size,
          contentType: f.contentType,
          sha256: f.sha256,
          createdAt,
        },
        f.bytes,
      ),
    ).catch((err: unknown) => {
      // No directory: the run's scripts wrote nothing (or never ran); it kept no files.
      if ((err as NodeJS.ErrnoException).code === "ENOENT") return undefined;
      throw err;
    });
    await store.putSet(runId, {
      collectedAt: clock.now(),
      files: found?.files ?? 0,
      bytes: found?.bytes ?? 0,
      skipped: found?.skipped ?? [],
      skippedMore: found?.skippedMore ?? 0,
    });
  }

  /** A failed collection keeps nothing: the files it saved go, and its set says why. */
  async function failed(runId: string, err: unknown): Promise<void> {
    await store.deleteOf([runId]);
    const reason = `the collection failed: ${(err as Error).message ?? String(err)}`;
    await store.putSet(runId, {
      collectedAt: clock.now(),
      files: 0,
      bytes: 0,
      skipped: [{ name: "", reason }],
      skippedMore: 0,
    });
  }

  return {
    track: (dir) => trackNodeFiles(dir, limits.maxFiles + 1000),
    async collect(runId, dir, nodes) {
      try {
        await save(runId, dir, nodes);
      } catch (err) {
        deps.logger.error({ err, runId }, "could not keep a run's files as artifacts");
        await failed(runId, err).catch(() => {});
      }
      // Deleted while its files were saved (or while they failed): nothing else would delete
      // them now. Checked after the set is written, so a delete that comes later takes it too.
      try {
        if (!(await deps.runs.getRun(null, runId))) await store.deleteOf([runId]);
      } catch (err) {
        deps.logger.error({ err, runId }, "could not drop the artifacts of a deleted run");
      }
      for (const l of listeners) l(runId);
    },
    onSaved(listener) {
      listeners.push(listener);
    },
  };
}
