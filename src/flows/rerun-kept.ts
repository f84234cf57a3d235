import { ErrorCode, SluiceError } from "../errors.ts";
import { recordedScripts } from "../runs/rerun.ts";
import type { RerunKind, Run, Store } from "../store/types.ts";

/**
 * A re-run or resume repeats the old run's revision (a task: its script version) and the script
 * versions its nodes ran (docs/dataflow-service.md, "Re-run and resume"). Those may have been
 * removed since, past LIMIT_REVISIONS_PER_FLOW or LIMIT_VERSIONS_PER_SCRIPT ("How many revisions
 * are kept"): the request is then refused naming what is gone, before anything is written,
 * instead of a new run that fails when it executes.
 */
export async function checkStillKept(
  store: Pick<Store, "keptVersions">,
  run: Run,
  kind: RerunKind,
): Promise<void> {
  const refuse = (why: string) =>
    new SluiceError(
      kind === "resume" ? ErrorCode.RUN_NOT_RESUMABLE : ErrorCode.RUN_NOT_RERUNNABLE,
      [run.id, why],
    );
  const version = Number(run.version);
  if (run.version !== null && Number.isSafeInteger(version)) {
    const kept = await store.keptVersions(run.elementType, run.elementId, [version]);
    if (!kept.has(version))
      throw refuse(
        run.elementType === "DPL"
          ? `its revision (version ${version}) of ${run.elementName} was removed: a flow keeps at most LIMIT_REVISIONS_PER_FLOW revisions`
          : `script ${run.elementName} version ${version}, which it ran, was removed: ${SCRIPT_BOUND}`,
      );
  }
  if (run.elementType !== "DPL") return;
  const byScript = new Map<string, { name: string; uses: { nodeId: string; version: number }[] }>();
  for (const u of recordedScripts(run)) {
    const entry = byScript.get(u.elementId) ?? { name: u.elementName, uses: [] };
    entry.uses.push({ nodeId: u.nodeId, version: u.version });
    byScript.set(u.elementId, entry);
  }
  for (const [elementId, { name, uses }] of byScript) {
    const kept = await store.keptVersions(
      "PY",
      elementId,
      uses.map((u) => u.version),
    );
    const gone = uses.find((u) => !kept.has(u.version));
    if (gone)
      throw refuse(
        `script ${name} version ${gone.version}, which its node ${gone.nodeId} ran, was removed: ${SCRIPT_BOUND}`,
      );
  }
}

const SCRIPT_BOUND = "a script keeps at most LIMIT_VERSIONS_PER_SCRIPT versions";
