import { errorText } from "../errors.ts";
/**
 * Runs one flow graph (docs/flow-graph.md): Promise-based scheduling, a node starts as soon as all its upstream
 * nodes are settled and at least one incoming edge was taken; otherwise it is skipped, which
 * propagates. Effects (scripts, subflows, fetch, clock) come in through FlowDeps.
 */

import { type Clock, systemClock, type TimerHandle } from "../clock.ts";
import type { FinishedStatus } from "../store/types.ts";
import { jsonSizer, tooLarge } from "./expr-size.ts";
import type { Configure, Edge, Graph, Vertex } from "./graph.ts";
import { NODES } from "./nodes/index.ts";
import type { FlowDeps, NodeContext } from "./nodes/types.ts";
import { type Plan, planOf, raceAbort, resultOf } from "./plan.ts";
import { reuseRecorded, takeEdges } from "./resume.ts";

export type { FlowDeps, ScriptResult } from "./nodes/types.ts";

import type { NodeState } from "../progress/types.ts";
import {
  keepReused,
  type LogKeeper,
  logKeeper,
  type NodeLog,
  type NodeStatus,
} from "./node-log.ts";

export type RunStatus = FinishedStatus;

export type { NodeLog, NodeStatus } from "./node-log.ts";

export interface FlowRunResult {
  status: RunStatus;
  result?: unknown;
  error?: string;
  failedNodeId?: string;
  nodes: NodeLog[];
}

export interface ExecuteFlowOptions {
  runId: string;
  graph: Graph;
  /** Normalized (normalizeConfigure); a `customized` runTimeout is enforced here. */
  configure: Configure;
  parameter: unknown;
  signal: AbortSignal;
  deps: FlowDeps;
  /** Node timeouts, retry delays and the run's own timeout; default: the system clock. */
  clock?: Clock | undefined;
  /** A resume: the node logs of the failed run whose succeeded nodes are not run again. */
  reuse?: { runId: string; nodes: readonly NodeLog[] } | undefined;
  /** Told each node's state as it starts (RUNNING) and ends (docs/live-progress.md). */
  onNode?: ((node: NodeState) => void) | undefined;
}

class Canceled extends Error {}

const message = errorText;

/** One execution of a graph: its plan, the state of every vertex, and how it ends. */
interface Execution {
  opts: ExecuteFlowOptions;
  clock: Clock;
  plan: Plan;
  /** Aborted by the caller's signal, the run's own timeout, or a failed node. */
  ctl: AbortController;
  status: (NodeStatus | "PENDING" | "RUNNING")[];
  outputs: unknown[];
  taken: Set<Edge>;
  logs: NodeLog[];
  failure: { nodeId?: string; error: string } | undefined;
  settled: number;
  running: number;
  finish: () => void;
  /** A node's output's size, about as JSON, given up just past the value limit (expr-size.ts). */
  sizeOf: (value: unknown) => number;
  /** The objects the run already reserved in memory (the parameter, earlier nodes' outputs). */
  held: WeakSet<object>;
  /** Keeps a node's input or output in its log, within the run's budget (node-log.ts). */
  keep: LogKeeper | null;
}

function sleep(x: Execution, ms: number): Promise<void> {
  let timer: TimerHandle | undefined;
  const slept = new Promise<void>((resolve) => {
    timer = x.clock.setTimeout(resolve, ms);
  });
  return raceAbort(slept, x.ctl.signal).finally(() => timer && x.clock.clearTimeout(timer));
}

function settle(x: Execution, i: number, s: NodeStatus): void {
  x.status[i] = s;
  const log = x.logs[i] as NodeLog;
  log.status = s;
  x.settled++;
  // A node that ran ends now (its log's end time is this one); a skipped one never started.
  if (log.startTime !== undefined && !log.reusedFrom) log.endTime ??= x.opts.deps.now();
  tell(x, log, s);
}

function tell(x: Execution, log: NodeLog, status: NodeState["status"]): void {
  const { nodeId, nodeType, startTime, endTime, attempts, error } = log;
  x.opts.onNode?.({ nodeId, nodeType, status, startTime, endTime, attempts, error });
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

/** The input of vertex i: the parameter (no inputs), the one taken input, or all keyed by source. */
function inputOf(x: Execution, i: number) {
  const inEdges = x.plan.incoming[i] ?? [];
  const inputs = inEdges
    .filter((e) => x.taken.has(e))
    .map((e) => ({ source: e.source, value: x.outputs[x.plan.sourceIndex.get(e) ?? -1] }));
  const input =
    inEdges.length === 0
      ? x.opts.parameter
      : inEdges.length === 1
        ? inputs[0]?.value
        : Object.fromEntries(inputs.map((v) => [v.source, v.value]));
  return { input, inputs };
}

async function runNode(x: Execution, i: number): Promise<void> {
  const { opts } = x;
  const vertex = x.plan.vertexes[i] as Vertex;
  const log = x.logs[i] as NodeLog;
  const { input, inputs } = inputOf(x, i);
  const def = NODES[vertex.type as keyof typeof NODES];
  log.startTime = opts.deps.now();
  tell(x, log, "RUNNING");
  x.keep?.(log, "input", input);
  const nodeLog: NodeContext["log"] = {};
  try {
    if (!def) throw new Error(`unknown node type: ${vertex.type}`);
    const value = await attempts(x, vertex, log, (signal) =>
      def.run({
        runId: opts.runId,
        vertex,
        config: (vertex.config ?? {}) as Record<string, unknown>,
        input,
        inputs,
        params: opts.parameter,
        prelude: opts.configure.prelude,
        signal,
        deps: opts.deps,
        log: nodeLog,
      }),
    );
    // Nodes without expressions build values too (a merge that holds one input twice, a join):
    // one past the limit stops here, before anything walks or writes it out in full.
    const size = x.sizeOf(value);
    if (size > opts.deps.valueBytes) throw tooLarge("the node's output is", opts.deps.valueBytes);
    holdValue(x, value, size);
    await takeEdges(
      opts.deps.expressions,
      x.plan.outgoing[i] ?? [],
      value,
      opts.parameter,
      x.taken,
    );
    x.outputs[i] = value;
    x.keep?.(log, "output", value);
    settle(x, i, "SUCCESS");
  } catch (err) {
    if (x.ctl.signal.aborted) settle(x, i, "CANCELED");
    else {
      log.error = message(err);
      settle(x, i, "FAILURE");
      for (const { edge } of x.plan.outgoing[i] ?? []) x.taken.delete(edge);
      if (!vertex.continueOnError && !x.failure) {
        x.failure = { nodeId: vertex.id, error: log.error };
        x.ctl.abort(new Canceled("another node failed"));
      }
    }
  } finally {
    log.endTime ??= opts.deps.now();
    // A script node's output counts against the run's budget like its values (node-log.ts).
    if (nodeLog.stdout !== undefined) x.keep?.(log, "stdout", nodeLog.stdout);
    if (nodeLog.stderr !== undefined) x.keep?.(log, "stderr", nodeLog.stderr);
    // Source lines and names, not data: kept whatever logContent says.
    if (nodeLog.traceback && log.status === "FAILURE") log.traceback = nodeLog.traceback;
  }
}

/**
 * Reserves a node's output in what runs may hold (docs/run-limits.md, "Values in memory") until
 * the run ends; an object the run already holds (a node passing its input on) counts once.
 */
function holdValue(x: Execution, value: unknown, size: number): void {
  const { hold } = x.opts.deps;
  if (!hold) return;
  const object = typeof value === "object" && value !== null;
  if (object && x.held.has(value)) return;
  hold(size);
  if (object) x.held.add(value);
}

/** Up to 1 + retries attempts, each bounded by timeoutSeconds; the run's abort ends them all. */
async function attempts(
  x: Execution,
  vertex: Vertex,
  log: NodeLog,
  body: (signal: AbortSignal) => Promise<unknown>,
): Promise<unknown> {
  const max = 1 + (vertex.retries ?? 0);
  for (let attempt = 1; ; attempt++) {
    log.attempts = attempt;
    let signal = x.ctl.signal;
    let timer: TimerHandle | undefined;
    let nodeTimedOut = false;
    const seconds = vertex.timeoutSeconds;
    if (seconds !== undefined) {
      const ctl = new AbortController();
      timer = x.clock.setTimeout(() => {
        nodeTimedOut = true;
        ctl.abort(new Error(`node timed out after ${seconds}s`));
      }, seconds * 1000);
      signal = AbortSignal.any([x.ctl.signal, ctl.signal]);
    }
    try {
      return await raceAbort(body(signal), signal);
    } catch (err) {
      if (x.ctl.signal.aborted) throw err;
      const e = nodeTimedOut ? new Error(`node timed out after ${seconds}s`) : err;
      if (attempt >= max) throw e;
      if (vertex.retryDelayMs) await sleep(x, vertex.retryDelayMs);
    } finally {
      if (timer) x.clock.clearTimeout(timer);
    }
  }
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
