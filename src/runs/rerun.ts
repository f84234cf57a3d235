import { ErrorCode, SluiceError } from "../errors.ts";
import type { FlowRunResult, NodeLog } from "../flows/executor.ts";
import type { Configure } from "../flows/graph.ts";
import type { ScriptPin } from "../store/revision-types.ts";
import { type Run, type Store, TERMINAL } from "../store/types.ts";
import type { ExecRun } from "./lifecycle-types.ts";
import type { ScriptUse } from "./script-node.ts";

/**
 * The rules of re-run and resume (docs/dataflow-service.md, "Re-run and resume"), checked at
 * request time so that a refusal writes nothing.
 */

/** Only a finished run is repeated: an unfinished one has no outcome to repeat yet. */
export function checkRerunnable(run: Run): void {
  if (!TERMINAL.has(run.status))
    throw new SluiceError(ErrorCode.RUN_NOT_RERUNNABLE, [
      run.id,
      `it has not finished (status ${run.status})`,
    ]);
  if (run.elementType === "DPL" && run.version == null)
    throw new SluiceError(ErrorCode.RUN_NOT_RERUNNABLE, [run.id, "it records no revision"]);
}

/** The node logs a failed flow run recorded (its detail.nodes), or none. */
export function recordedNodes(run: Pick<Run, "detail">): NodeLog[] {
  const nodes = run.detail?.nodes;
  return Array.isArray(nodes) ? (nodes as NodeLog[]) : [];
}

/**
 * A resume reuses the outputs the failed run recorded; those are kept only with `logContent`
 * DETAILED (src/flows/executor.ts writes `output` into each node log then). The configure is the
 * revision's own, the same one the failed run ran with.
 */
export function checkResumable(run: Run, configure: Configure): void {
  const refuse = (why: string) => new SluiceError(ErrorCode.RUN_NOT_RESUMABLE, [run.id, why]);
  if (run.elementType !== "DPL") throw refuse("only a flow run resumes; re-run a script task");
  if (run.status !== "FAILURE")
    throw refuse(`only a FAILURE run resumes (status ${run.status}); re-run it instead`);
  if (configure.logContent !== "DETAILED")
    throw refuse(
      `the outputs of its nodes were not kept (configure.logContent is ${configure.logContent}; a resume needs DETAILED); re-run it instead`,
    );
  const nodes = recordedNodes(run);
  if (nodes.length === 0)
    throw refuse("it recorded no node logs (it failed before its graph ran); re-run it instead");
  const unkept = nodes.find((n) => n.status === "SUCCESS" && n.omitted?.includes("output"));
  if (unkept)
    throw refuse(
      `the output of node ${unkept.nodeId} was too large to keep (LIMIT_NODE_LOG_BYTES, or the run's share of LIMIT_RESULT_BYTES); re-run it instead`,
    );
}

/** The script versions a flow run executed (its detail.scripts), or none. */
export function recordedScripts(run: Pick<Run, "detail">): ScriptUse[] {
  const scripts = run.detail?.scripts;
  return Array.isArray(scripts) ? (scripts as ScriptUse[]) : [];
}

/**
 * The pins of a re-run or resume (docs/dataflow-service.md, "Re-run and resume"): each script node
 * the original run executed runs the version it ran, pinned or not; a node it never reached runs
 * what the revision pins now (the original ran no version of it).
 */
export function repeatPins(original: Run, revisionPins: readonly ScriptPin[]): ScriptPin[] {
  const ran: ScriptPin[] = recordedScripts(original).map(({ pinned: _, ...pin }) => pin);
  const ranIds = new Set(ran.map((p) => p.nodeId));
  return [...ran, ...revisionPins.filter((p) => !ranIds.has(p.nodeId))];
}

/**
 * The run a re-run or resume repeats, read when it executes (docs/dataflow-service.md, "Re-run and
 * resume"): its script versions, and a resume's node logs, are what the new run repeats.
 */
export async function originalRun(
  store: Pick<Store, "getRun">,
  r: ExecRun,
): Promise<Run | undefined> {
  if (!r.rerunOf) return undefined;
  const original = await store.getRun(r.scope, r.rerunOf.runId);
  // Deleted since the request was accepted: nothing silently runs other versions or every node.
  const verb = r.rerunOf.kind === "resume" ? "resumes" : "re-runs";
  if (!original) throw new Error(`run ${r.rerunOf.runId}, which this run ${verb}, was deleted`);
  return original;
}

/** A resume's failed run's node logs: what the new run does not do again. */
export function resumed(r: ExecRun, original: Run | undefined) {
  if (r.rerunOf?.kind !== "resume" || !original) return undefined;
  return { runId: original.id, nodes: recordedNodes(original) };
}

/** The script versions behind a run's outputs: those a resume reused, then those it executed. */
export function withReused(out: FlowRunResult, original: Run | undefined, used: ScriptUse[]) {
  if (!original) return used;
  const reused = new Set(out.nodes.filter((n) => n.reusedFrom).map((n) => n.nodeId));
  if (reused.size === 0) return used;
  return [...recordedScripts(original).filter((u) => reused.has(u.nodeId)), ...used];
}
