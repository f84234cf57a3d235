import { readdir } from "node:fs/promises";
import path from "node:path";
import { normalizeConfigure } from "../flows/graph.ts";
import type { ArtifactStore } from "../store/kysely-artifacts.ts";
import type { Store } from "../store/types.ts";
import type { ArtifactKeeper } from "./keeper.ts";

/**
 * At start (docs/artifacts.md, "After a crash"): the `keep` runs that ended before `since` (in a
 * previous life of this node, or by its recovery) and whose files were never collected, since the
 * process stopped between the run's end and the end of its collection. Their directories are
 * still on this node's disk: each is collected now, one at a time, as at a run's end (files
 * already saved are not saved twice), its files attributed to no node. Runs this process ends
 * end after `since`, so a collection under way is never repeated. Answers the runs collected.
 */
export async function collectOwed(deps: {
  keeper: Pick<ArtifactKeeper, "collect">;
  artifacts: Pick<ArtifactStore, "collected">;
  store: Pick<Store, "getRun" | "flowRevision">;
  dataDir: string;
  since: number;
  logger: { error(obj: unknown, msg?: string): void };
  /** The service is stopping: the pass ends after the run it is at. */
  stopping: () => boolean;
}): Promise<string[]> {
  const root = path.join(deps.dataDir, "tasks");
  const names = await readdir(root).catch(() => [] as string[]);
  // A revision never changes: whether it keeps files is read once per revision.
  const keeps = new Map<string, Promise<boolean>>();
  const collected: string[] = [];
  for (const name of names) {
    if (deps.stopping()) break;
    try {
      if (!(await owed(deps, keeps, name))) continue;
      await deps.keeper.collect(name, path.join(root, name));
      collected.push(name);
    } catch (err) {
      deps.logger.error({ err, runId: name }, "could not keep the files of a run ended earlier");
    }
  }
  return collected;
}

/** Starts `collectOwed` in the background; `stop` ends it after the run it is at. */
export function startCollectingOwed(deps: Omit<Parameters<typeof collectOwed>[0], "stopping">): {
  stop(): Promise<void>;
} {
  let stopping = false;
  const pass = collectOwed({ ...deps, stopping: () => stopping });
  return {
    async stop() {
      stopping = true;
      await pass;
    },
  };
}

async function owed(
  deps: Parameters<typeof collectOwed>[0],
  keeps: Map<string, Promise<boolean>>,
  runId: string,
): Promise<boolean> {
  const run = await deps.store.getRun(null, runId);
  if (!run || run.endTime === null || run.endTime > deps.since) return false;
  if (run.elementType !== "DPL" || run.version === null) return false;
  const key = `${run.elementId}:${run.version}`;
  let keep = keeps.get(key);
  if (!keep) {
    // Only a flow that keeps its files has artifacts; a revision removed since leaves it unknown.
    keep = deps.store
      .flowRevision(run.elementId, Number(run.version))
      .then(
        (rev) => rev !== undefined && normalizeConfigure(rev.configure).fileCleanup.type === "keep",
      );
    keeps.set(key, keep);
  }
  return (await keep) && !(await deps.artifacts.collected(runId));
}
