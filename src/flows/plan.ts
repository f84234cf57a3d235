/**
 * What the executor (executor.ts) reads of a graph: its plan, built once per deployed revision,
 * and what a run's result is made of (docs/flow-graph.md).
 */
import type { Edge, Graph, Vertex } from "./graph.ts";

export interface Plan {
  vertexes: Vertex[];
  incoming: Edge[][];
  outgoing: { edge: Edge; target: number }[][];
  sourceIndex: Map<Edge, number>;
  outputIndex: number;
  sinks: number[];
}

// A graph object is one deployed revision: its plan is built once and shared by every run.
const plans = new WeakMap<Graph, Plan>();

export function planOf(graph: Graph): Plan {
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

/** Settles with `p`, or rejects as soon as `signal` aborts, even if `p` ignores the signal. */
export function raceAbort<T>(p: Promise<T>, signal: AbortSignal): Promise<T> {
  if (signal.aborted) return Promise.reject(signal.reason);
  let onAbort = () => {};
  const aborted = new Promise<never>((_, reject) => {
    onAbort = () => reject(signal.reason);
    signal.addEventListener("abort", onAbort, { once: true });
  });
  return Promise.race([p, aborted]).finally(() => signal.removeEventListener("abort", onAbort));
}

/** docs/flow-graph.md: the output node's input; else the single sink's output; else an object keyed by sink id. */
export function resultOf(
  plan: Plan,
  status: readonly string[],
  outputs: readonly unknown[],
): unknown {
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
