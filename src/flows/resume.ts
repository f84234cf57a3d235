import { evalExpr, truthy } from "./expr.ts";
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
      for (const { edge } of x.outgoing[i] ?? [])
        if (edge.when === undefined || truthy(await evalExpr(edge.when, rec.output, parameter)))
          x.taken.add(edge);
      x.outputs[i] = rec.output;
      x.logs[i] = { ...rec, reusedFrom: reuse.runId };
      settle(i);
      changed = true;
    }
  }
}
