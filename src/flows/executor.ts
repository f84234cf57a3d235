/**
 * Runs one flow graph (docs/flow-graph.md): Promise-based scheduling, a node starts as soon as all its upstream
 * nodes are settled and at least one incoming edge was taken; otherwise it is skipped, which
 * propagates. Effects (scripts, subflows, fetch, clock) come in through FlowDeps.
 */

import { systemClock } from "../clock.ts";
import type { FinishedStatus } from "../store/types.ts";
import { Canceled, type ExecuteFlowOptions, type Execution, settle } from "./execution.ts";
import { jsonSizer } from "./expr-size.ts";
import { keepReused, logKeeper, type NodeLog } from "./node-log.ts";
import { runNode } from "./node-run.ts";
import { planOf, resultOf } from "./plan.ts";
import { reuseRecorded } from "./resume.ts";

export type { FlowDeps, ScriptResult } from "./nodes/types.ts";

export type RunStatus = FinishedStatus;

export type { NodeLog, NodeStatus } from "./node-log.ts";

export interface FlowRunResult {
  status: RunStatus;
  result?: unknown;
  error?: string;
  failedNodeId?: string;
  nodes: NodeLog[];
}

/** Start, skip or leave pending vertex i depending on its upstream state. */
function consider(x: Execution, i: number): void {
  if (x.status[i] !== "PENDING" || x.ctl.signal.aborted) return;
  const inEdges = x.plan.incoming[i] ?? [];
  for (const e of inEdges) {
    const s = x.status[x.plan.sourceIndex.get(e) ?? -1];
    if (s === "PENDING" || s === "RUNNING") return;
  }
  if (inEdges.length > 0 && !inEdges.some((e) => x.taken.has(e))) {
    settle(x, i, "SKIPPED");
    for (const o of x.plan.outgoing[i] ?? []) consider(x, o.target);
    return;
  }
  x.status[i] = "RUNNING";
  x.running++;
  void runNode(x, i).finally(() => {
    x.running--;
    if (!x.ctl.signal.aborted && !x.failure)
      for (const o of x.plan.outgoing[i] ?? []) consider(x, o.target);
    if (x.running === 0) x.finish();
  });
}

/** How the run ended, once no vertex runs any more. */
function resultOfRun(x: Execution, timedOutAfter: number | undefined): FlowRunResult {
  const n = x.plan.vertexes.length;
  if (!x.ctl.signal.aborted && !x.failure && x.settled < n) {
    // Only a cycle (rejected at deploy) can leave vertexes waiting on each other.
    x.failure = { error: "flow graph has a cycle; some nodes could never start" };
  }
  if (timedOutAfter !== undefined) x.failure = { error: `run timed out after ${timedOutAfter}s` };
  if (x.failure) {
    return {
      status: "FAILURE",
      error: x.failure.error,
      ...(x.failure.nodeId !== undefined ? { failedNodeId: x.failure.nodeId } : {}),
      nodes: x.logs,
    };
  }
  if (x.ctl.signal.aborted) return { status: "CANCELED", error: "run canceled", nodes: x.logs };
  return { status: "SUCCESS", result: resultOf(x.plan, x.status, x.outputs), nodes: x.logs };
}

export async function executeFlow(opts: ExecuteFlowOptions): Promise<FlowRunResult> {
  const plan = planOf(opts.graph);
  const n = plan.vertexes.length;
  let finish = () => {};
  const finished = new Promise<void>((resolve) => {
    finish = resolve;
  });
  const x: Execution = {
    opts,
    clock: opts.clock ?? systemClock,
    plan,
    ctl: new AbortController(),
    status: new Array(n).fill("PENDING"),
    outputs: new Array(n),
    taken: new Set(),
    logs: plan.vertexes.map((v) => ({
      nodeId: v.id,
      nodeType: v.type,
      status: "CANCELED",
      attempts: 0,
    })),
    failure: undefined,
    sizeOf: jsonSizer(opts.deps.valueBytes),
    held: new WeakSet(
      typeof opts.parameter === "object" && opts.parameter !== null ? [opts.parameter] : [],
    ),
    // The logs of a run share the budget of one value (LIMIT_RESULT_BYTES).
    keep:
      opts.configure.logContent === "DETAILED"
        ? logKeeper(opts.deps.logValueBytes, opts.deps.valueBytes)
        : null,
    settled: 0,
    running: 0,
    finish: () => finish(),
  };
  const onOuterAbort = () => x.ctl.abort(new Canceled("run canceled"));
  if (opts.signal.aborted) onOuterAbort();
  else opts.signal.addEventListener("abort", onOuterAbort, { once: true });
  let timedOutAfter: number | undefined;
  const rt = opts.configure.runTimeout;
  const runTimer =
    rt.type === "customized"
      ? x.clock.setTimeout(() => {
          timedOutAfter = rt.seconds;
          x.ctl.abort(new Error(`run timed out after ${rt.seconds}s`));
        }, rt.seconds * 1000)
      : undefined;

  if (opts.reuse)
    await reuseRecorded(
      { ...plan, status: x.status, outputs: x.outputs, taken: x.taken, logs: x.logs },
      opts.reuse,
      opts.parameter,
      opts.deps.expressions,
      (i) => {
        if (x.keep) keepReused(x.keep, x.logs[i] as NodeLog);
        settle(x, i, "SUCCESS");
      },
    );
  for (let i = 0; i < n; i++) consider(x, i);
  if (x.running === 0) finish();
  await finished;
  if (runTimer) x.clock.clearTimeout(runTimer);
  opts.signal.removeEventListener("abort", onOuterAbort);
  return resultOfRun(x, timedOutAfter);
}
