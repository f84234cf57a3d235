/** Deploy-time checks of the graph as a whole (docs/flow-graph.md): cycles and reachability. */
import type { Edge } from "./graph.ts";
import { type AddFinding, type FoundVertex, Severity, ValidationCode } from "./validation-codes.ts";

/** One CYCLE finding per edge that closes a cycle (DFS back edge), at that edge. */
export function checkCycles(
  vertexes: readonly FoundVertex[],
  edges: readonly { index: number; edge: Edge }[],
  add: AddFinding,
): void {
  const out = new Map<string, { index: number; edge: Edge }[]>();
  for (const e of edges) out.set(e.edge.source, [...(out.get(e.edge.source) ?? []), e]);
  const color = new Map<string, 1 | 2>();
  const typeOf = new Map(vertexes.map((f) => [f.vertex.id, f.vertex.type]));
  const visit = (id: string): void => {
    color.set(id, 1);
    for (const e of out.get(id) ?? []) {
      const c = color.get(e.edge.target);
      if (c === 1) {
        add(
          ValidationCode.CYCLE,
          e.edge.target,
          typeOf.get(e.edge.target) ?? "unknown",
          ["flow", "edges", e.index],
          `edge ${e.edge.source} -> ${e.edge.target} closes a cycle`,
        );
      } else if (c === undefined) visit(e.edge.target);
    }
    color.set(id, 2);
  };
  for (const { vertex } of vertexes) if (!color.has(vertex.id)) visit(vertex.id);
}

/** Warn about vertexes no input node (or, without input nodes, no root) can reach. */
export function checkReachable(
  vertexes: readonly FoundVertex[],
  edges: readonly { edge: Edge }[],
  add: AddFinding,
): void {
  const targets = new Set(edges.map((e) => e.edge.target));
  const inputs = vertexes.filter((f) => f.vertex.type === "input");
  const entries = inputs.length > 0 ? inputs : vertexes.filter((f) => !targets.has(f.vertex.id));
  const reached = new Set(entries.map((f) => f.vertex.id));
  const queue = [...reached];
  for (let id = queue.shift(); id !== undefined; id = queue.shift()) {
    for (const e of edges) {
      if (e.edge.source === id && !reached.has(e.edge.target)) {
        reached.add(e.edge.target);
        queue.push(e.edge.target);
      }
    }
  }
  for (const { index, vertex } of vertexes) {
    if (!reached.has(vertex.id)) {
      add(
        ValidationCode.UNREACHABLE_VERTEX,
        vertex.id,
        vertex.type,
        ["flow", "vertexes", index],
        "vertex is not reachable from an input node",
        {},
        Severity.WARNING,
      );
    }
  }
}
