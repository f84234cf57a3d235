import type { FlowExpressions } from "./expr-jobs.ts";
import type { Edge, Vertex } from "./graph.ts";
import type { NodeLog } from "./node-log.ts";

/** The parts of one graph execution a resume settles ahead of the run (src/flows/executor.ts). */
export interface ReuseState {
  vertexes: Vertex[];
  incoming: Edge[][];
  outgoing: { edge: Edge; target: number }[][];
  sourceIndex: Map<Edge, number>;
  status: string[];
  outputs: unknown[];
  taken: Set<Edge>;
  logs: NodeLog[];
}

/**
 * A resume (docs/dataflow-service.md, "Re-run and resume"): a vertex that succeeded in the failed
 * run, and whose upstream vertexes are all reused too, settles at once with its recorded output,
 * so its side effects are not repeated; its edges are taken again by their `when` over that output.
 * A vertex with an upstream that runs again runs again (its input may differ now).
 */
export async function reuseRecorded(
  x: ReuseState,
  reuse: { runId: string; nodes: readonly NodeLog[] },
  parameter: unknown,
  expressions: FlowExpressions,
  settle: (i: number) => void,
): Promise<void> {
  const byId = new Map(reuse.nodes.map((l) => [l.nodeId, l]));
  for (let changed = true; changed; ) {
    changed = false;
    for (let i = 0; i < x.vertexes.length; i++) {
      const v = x.vertexes[i] as Vertex;
      const rec = byId.get(v.id);
      if (x.status[i] !== "PENDING" || rec?.status !== "SUCCESS" || rec.nodeType !== v.type)
        continue;
      const upstream = (x.incoming[i] ?? []).map((e) => x.status[x.sourceIndex.get(e) ?? -1]);
      if (upstream.some((s) => s !== "SUCCESS")) continue;
      await takeEdges(expressions, x.outgoing[i] ?? [], rec.output, parameter, x.taken);
      x.outputs[i] = rec.output;
      x.logs[i] = { ...rec, reusedFrom: reuse.runId };
      settle(i);
      changed = true;
    }
  }
}

/** Adds to `taken` each outgoing edge without a condition, and each whose `when` holds for `value`. */
export async function takeEdges(
  expressions: FlowExpressions,
  outgoing: readonly { edge: Edge }[],
  value: unknown,
  params: unknown,
  taken: Set<Edge>,
): Promise<void> {
  const texts: string[] = [];
  // Each condition's edge, as findings name it: a failing `when` says which edge it is.
  const names: string[] = [];
  for (const { edge } of outgoing) {
    if (edge.when === undefined) taken.add(edge);
    else {
      texts.push(edge.when);
      names.push(edge.id ?? `${edge.source}->${edge.target}`);
    }
  }
  if (texts.length === 0) return;
  const holds = await expressions.conditions(texts, value, params, names);
  let k = 0;
  for (const { edge } of outgoing) if (edge.when !== undefined && holds[k++]) taken.add(edge);
}
