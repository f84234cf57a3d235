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
}): Promise<string[]> {
  const root = path.join(deps.dataDir, "tasks");
  const names = await readdir(root).catch(() => [] as string[]);
  const collected: string[] = [];
  for (const name of names) {
    try {
      if (!(await owed(deps, name))) continue;
      await deps.keeper.collect(name, path.join(root, name));
      collected.push(name);
    } catch (err) {
      deps.logger.error({ err, runId: name }, "could not keep the files of a run ended earlier");
    }
  }
  return collected;
}

async function owed(deps: Parameters<typeof collectOwed>[0], runId: string): Promise<boolean> {
  const run = await deps.store.getRun(null, runId);
  if (!run || run.endTime === null || run.endTime > deps.since) return false;
  if (run.elementType !== "DPL" || run.version === null) return false;
  if (await deps.artifacts.collected(runId)) return false;
  // Only a flow that keeps its files has artifacts; a revision removed since leaves it unknown.
  const rev = await deps.store.flowRevision(run.elementId, Number(run.version));
  return rev !== undefined && normalizeConfigure(rev.configure).fileCleanup.type === "keep";
}
