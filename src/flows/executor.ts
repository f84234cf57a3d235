/**
 * Runs one flow graph (docs/flow-graph.md): Promise-based scheduling, a node starts as soon as all its upstream
 * nodes are settled and at least one incoming edge was taken; otherwise it is skipped, which
 * propagates. Effects (scripts, subflows, fetch, clock) come in through FlowDeps.
 */

import type { FinishedStatus } from "../store/types.ts";
import { evalExpr, truthy } from "./expr.ts";
import type { Configure, Edge, Graph, Vertex } from "./graph.ts";
import { NODES } from "./nodes/index.ts";
import type { FlowDeps, NodeContext } from "./nodes/types.ts";

export type { FlowDeps, ScriptResult } from "./nodes/types.ts";

export type NodeStatus = "SUCCESS" | "FAILURE" | "SKIPPED" | "CANCELED";
export type RunStatus = FinishedStatus;

export interface NodeLog {
  nodeId: string;
  nodeType: string;
  status: NodeStatus;
  startTime?: number;
  endTime?: number;
  attempts: number;
  error?: string;
  input?: unknown;
  output?: unknown;
  stdout?: string;
  stderr?: string;
}

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
}

interface Plan {
  vertexes: Vertex[];
  incoming: Edge[][];
  outgoing: { edge: Edge; target: number }[][];
  sourceIndex: Map<Edge, number>;
  outputIndex: number;
  sinks: number[];
}

// A graph object is one deployed revision: its plan is built once and shared by every run.
const plans = new WeakMap<Graph, Plan>();

function planOf(graph: Graph): Plan {
  const cached = plans.get(graph);
  if (cached) return cached;
  const vertexes = graph.vertexes;
  const index = new Map(vertexes.map((v, i) => [v.id, i]));
  const incoming: Edge[][] = vertexes.map(() => []);
  const outgoing: { edge: Edge; target: number }[][] = vertexes.map(() => []);
  const sourceIndex = new Map<Edge, number>();
  for (const edge of graph.edges ?? []) {
    const s = index.get(edge.source);
    const t = index.get(edge.target);
    if (s === undefined || t === undefined) continue;
    incoming[t]?.push(edge);
    outgoing[s]?.push({ edge, target: t });
    sourceIndex.set(edge, s);
  }
  const plan: Plan = {
    vertexes,
    incoming,
    outgoing,
    sourceIndex,
    outputIndex: vertexes.findIndex((v) => v.type === "output"),
    sinks: vertexes.flatMap((_, i) => (outgoing[i]?.length === 0 ? [i] : [])),
  };
  plans.set(graph, plan);
  return plan;
}

class Canceled extends Error {}

/** Settles with `p`, or rejects as soon as `signal` aborts, even if `p` ignores the signal. */
function raceAbort<T>(p: Promise<T>, signal: AbortSignal): Promise<T> {
  if (signal.aborted) return Promise.reject(signal.reason);
  let onAbort = () => {};
  const aborted = new Promise<never>((_, reject) => {
    onAbort = () => reject(signal.reason);
    signal.addEventListener("abort", onAbort, { once: true });
  });
  return Promise.race([p, aborted]).finally(() => signal.removeEventListener("abort", onAbort));
}

function sleep(ms: number, signal: AbortSignal): Promise<void> {
  return raceAbort(new Promise((resolve) => setTimeout(resolve, ms)), signal);
}

const message = (err: unknown) => (err instanceof Error ? err.message : String(err));

export async function executeFlow(opts: ExecuteFlowOptions): Promise<FlowRunResult> {
  const { graph, configure, parameter, deps } = opts;
  const plan = planOf(graph);
  const n = plan.vertexes.length;
  const detailed = configure.logContent === "DETAILED";
  const runCtl = new AbortController();
  const onOuterAbort = () => runCtl.abort(new Canceled("run canceled"));
  if (opts.signal.aborted) onOuterAbort();
  else opts.signal.addEventListener("abort", onOuterAbort, { once: true });
  let timedOut = false;
  const rt = configure.runTimeout;
  const runTimer =
    rt.type === "customized"
      ? setTimeout(() => {
          timedOut = true;
          runCtl.abort(new Error(`run timed out after ${rt.seconds}s`));
        }, rt.seconds * 1000)
      : undefined;

  const status: (NodeStatus | "PENDING" | "RUNNING")[] = new Array(n).fill("PENDING");
  const outputs: unknown[] = new Array(n);
  const taken = new Set<Edge>();
  const logs: NodeLog[] = plan.vertexes.map((v) => ({
    nodeId: v.id,
    nodeType: v.type,
    status: "CANCELED",
    attempts: 0,
  }));
  let failure: { nodeId?: string; error: string } | undefined;
  let settled = 0;
  let running = 0;
  let finish = () => {};
  const finished = new Promise<void>((resolve) => {
    finish = resolve;
  });

  const settle = (i: number, s: NodeStatus) => {
    status[i] = s;
    settled++;
  };

  /** Start, skip or leave pending vertex i depending on its upstream state. */
  const consider = (i: number) => {
    if (status[i] !== "PENDING" || runCtl.signal.aborted) return;
    const inEdges = plan.incoming[i] ?? [];
    for (const e of inEdges) {
      const s = status[plan.sourceIndex.get(e) ?? -1];
      if (s === "PENDING" || s === "RUNNING") return;
    }
    if (inEdges.length > 0 && !inEdges.some((e) => taken.has(e))) {
      settle(i, "SKIPPED");
      (logs[i] as NodeLog).status = "SKIPPED";
      for (const o of plan.outgoing[i] ?? []) consider(o.target);
      return;
    }
    status[i] = "RUNNING";
    running++;
    void runNode(i).finally(() => {
      running--;
      if (runCtl.signal.aborted || failure) {
        if (running === 0) finish();
        return;
      }
      for (const o of plan.outgoing[i] ?? []) consider(o.target);
      if (running === 0) finish();
    });
  };

  const runNode = async (i: number): Promise<void> => {
    const vertex = plan.vertexes[i] as Vertex;
    const log = logs[i] as NodeLog;
    const inEdges = plan.incoming[i] ?? [];
    const inputs = inEdges
      .filter((e) => taken.has(e))
      .map((e) => ({ source: e.source, value: outputs[plan.sourceIndex.get(e) ?? -1] }));
    const input =
      inEdges.length === 0
        ? parameter
        : inEdges.length === 1
          ? inputs[0]?.value
          : Object.fromEntries(inputs.map((x) => [x.source, x.value]));
    const def = NODES[vertex.type as keyof typeof NODES];
    log.startTime = deps.now();
    if (detailed) log.input = input;
    const nodeLog: NodeContext["log"] = {};
    try {
      if (!def) throw new Error(`unknown node type: ${vertex.type}`);
      const value = await attempts(vertex, log, (signal) =>
        def.run({
          runId: opts.runId,
          vertex,
          config: (vertex.config ?? {}) as Record<string, unknown>,
          input,
          inputs,
          params: parameter,
          prelude: configure.prelude,
          signal,
          deps,
          log: nodeLog,
        }),
      );
      for (const { edge } of plan.outgoing[i] ?? []) {
        if (edge.when === undefined || truthy(await evalExpr(edge.when, value, parameter))) {
          taken.add(edge);
        }
      }
      outputs[i] = value;
      log.status = "SUCCESS";
      if (detailed) log.output = value;
      settle(i, "SUCCESS");
    } catch (err) {
      if (runCtl.signal.aborted) {
        log.status = "CANCELED";
        settle(i, "CANCELED");
      } else {
        log.status = "FAILURE";
        log.error = message(err);
        settle(i, "FAILURE");
        for (const { edge } of plan.outgoing[i] ?? []) taken.delete(edge);
        if (!vertex.continueOnError && !failure) {
          failure = { nodeId: vertex.id, error: log.error };
          runCtl.abort(new Canceled("another node failed"));
        }
      }
    } finally {
      log.endTime = deps.now();
      if (detailed && nodeLog.stdout !== undefined) log.stdout = nodeLog.stdout;
      if (detailed && nodeLog.stderr !== undefined) log.stderr = nodeLog.stderr;
    }
  };

  /** Up to 1 + retries attempts, each bounded by timeoutSeconds; the run's abort ends them all. */
  const attempts = async (
    vertex: Vertex,
    log: NodeLog,
    body: (signal: AbortSignal) => Promise<unknown>,
  ): Promise<unknown> => {
    const max = 1 + (vertex.retries ?? 0);
    for (let attempt = 1; ; attempt++) {
      log.attempts = attempt;
      let signal = runCtl.signal;
      let timer: ReturnType<typeof setTimeout> | undefined;
      let nodeTimedOut = false;
      if (vertex.timeoutSeconds !== undefined) {
        const ctl = new AbortController();
        const seconds = vertex.timeoutSeconds;
        timer = setTimeout(() => {
          nodeTimedOut = true;
          ctl.abort(new Error(`node timed out after ${seconds}s`));
        }, seconds * 1000);
        signal = AbortSignal.any([runCtl.signal, ctl.signal]);
      }
      try {
        return await raceAbort(body(signal), signal);
      } catch (err) {
        if (runCtl.signal.aborted) throw err;
        const e = nodeTimedOut ? new Error(`node timed out after ${vertex.timeoutSeconds}s`) : err;
        if (attempt >= max) throw e;
        if (vertex.retryDelayMs) await sleep(vertex.retryDelayMs, runCtl.signal);
      } finally {
        clearTimeout(timer);
      }
    }
  };

  for (let i = 0; i < n; i++) consider(i);
  if (running === 0) finish();
  await finished;
  clearTimeout(runTimer);
  opts.signal.removeEventListener("abort", onOuterAbort);

  if (!runCtl.signal.aborted && !failure && settled < n) {
    // Only a cycle (rejected at deploy) can leave vertexes waiting on each other.
    failure = { error: "flow graph has a cycle; some nodes could never start" };
  }
  if (timedOut)
    failure = { error: `run timed out after ${rt.type === "customized" ? rt.seconds : 0}s` };
  if (failure) {
    return {
      status: "FAILURE",
      error: failure.error,
      ...(failure.nodeId !== undefined ? { failedNodeId: failure.nodeId } : {}),
      nodes: logs,
    };
  }
  if (runCtl.signal.aborted) return { status: "CANCELED", error: "run canceled", nodes: logs };
  return { status: "SUCCESS", result: resultOf(plan, status, outputs), nodes: logs };
}

/** docs/flow-graph.md: the output node's input; else the single sink's output; else an object keyed by sink id. */
function resultOf(plan: Plan, status: readonly string[], outputs: readonly unknown[]): unknown {
  const ok = (i: number) => status[i] === "SUCCESS";
  if (plan.outputIndex >= 0) return ok(plan.outputIndex) ? outputs[plan.outputIndex] : null;
  if (plan.sinks.length === 1) {
    const only = plan.sinks[0] as number;
    return ok(only) ? outputs[only] : null;
  }
  const out: Record<string, unknown> = {};
  for (const i of plan.sinks) if (ok(i)) out[(plan.vertexes[i] as Vertex).id] = outputs[i];
  return out;
}
