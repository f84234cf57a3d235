/**
 * Deploy-time validation of a flow (docs/flow-graph.md) and its configure (docs/flow-graph.md). Pure apart from the two lookups in
 * ValidationContext. Returns every finding (not just the first), each with a JSON path into the
 * deploy request body so that an editor can point at the offending field.
 */

import { expressionError } from "./expr.ts";
import { Edge, isNodeType, NODE_TYPES, shortName, Vertex } from "./graph.ts";
import { type JsonPath, schemaIssues } from "./schema-issues.ts";
import { validateConfigure } from "./validate-configure.ts";
import { checkCycles, checkReachable } from "./validate-graph.ts";
import { checkNodes } from "./validate-nodes.ts";
import {
  type AddFinding,
  type FoundVertex,
  Severity,
  ValidationCode,
  type ValidationCodeValue,
  type ValidationContext,
  type ValidationResult,
} from "./validation-codes.ts";

const isRecord = (v: unknown): v is Record<string, unknown> =>
  typeof v === "object" && v !== null && !Array.isArray(v);

export async function validateFlow(
  request: { flow: unknown; configure: unknown },
  ctx: ValidationContext,
): Promise<ValidationResult[]> {
  const out: ValidationResult[] = [];
  const add = (
    errorCode: ValidationCodeValue,
    nodeId: string,
    nodeType: string,
    path: JsonPath,
    errorMessage: string,
    extra: { operatorId?: string | undefined; operatorType?: string | undefined } = {},
    severity: ValidationResult["severity"] = Severity.ERROR,
  ) => {
    const r: ValidationResult = { errorCode, nodeId, nodeType, errorMessage, severity, path };
    if (extra.operatorId !== undefined) r.operatorId = extra.operatorId;
    if (extra.operatorType !== undefined) r.operatorType = extra.operatorType;
    out.push(r);
  };

  const { flow, configure } = request;
  const prelude =
    isRecord(configure) && typeof configure.prelude === "string" ? configure.prelude : "";
  // When the prelude itself does not parse, that is reported once; code is then checked alone.
  const preludeErr = prelude === "" ? null : await ctx.checkPythonSyntax(prelude);
  const vertexes: FoundVertex[] = [];
  const edges: { index: number; edge: Edge }[] = [];

  if (!isRecord(flow) || !Array.isArray(flow.vertexes)) {
    const path = isRecord(flow) ? ["flow", "vertexes"] : ["flow"];
    add(
      ValidationCode.INVALID_GRAPH,
      "flow",
      "flow",
      path,
      "flow must be {vertexes: [...], edges: [...]}",
    );
  } else if (flow.edges !== undefined && flow.edges !== null && !Array.isArray(flow.edges)) {
    add(ValidationCode.INVALID_GRAPH, "flow", "flow", ["flow", "edges"], "edges must be an array");
  } else {
    const declared = collectVertexes(flow.vertexes, vertexes, add);
    collectEdges((flow.edges ?? []) as unknown[], vertexes, declared, edges, add);
    await checkNodes(vertexes, edges, preludeErr === null ? prelude : "", ctx, add);
    checkCycles(vertexes, edges, add);
    // With a vertex rejected, its successors would all be "unreachable": noise about one fault.
    if (declared.size === vertexes.length) checkReachable(vertexes, edges, add);
  }

  const inputSchemas = vertexes
    .filter((f) => f.vertex.type === "input" && isRecord(f.vertex.config))
    .map((f) => (f.vertex.config as Record<string, unknown>).schema)
    .filter((s) => s !== undefined);
  out.push(...(await validateConfigure(configure, inputSchemas, ctx)));
  if (preludeErr) {
    const msg =
      preludeErr.line === undefined
        ? preludeErr.message
        : `Python syntax error at line ${preludeErr.line}: ${preludeErr.message}`;
    add(
      ValidationCode.PYTHON_SYNTAX_ERROR,
      "configure",
      "configure",
      ["configure", "prelude"],
      msg,
    );
  }
  return out;
}

/**
 * Well-formed vertexes with unique ids and known types go on to the deeper checks. Returns every
 * id declared, accepted or not: an edge to a vertex already reported (say, of an unknown type)
 * is not reported again as an edge to nothing.
 */
function collectVertexes(raw: unknown[], found: FoundVertex[], add: AddFinding): Set<string> {
  const seen = new Set<string>();
  const declared = new Set<string>();
  let outputs = 0;
  raw.forEach((v, i) => {
    const path: JsonPath = ["flow", "vertexes", i];
    // A finding names the node by its place when its ID is no name (docs/flow-graph.md).
    const nodeId = (isRecord(v) && shortName(v.id)) || `#${i}`;
    const nodeType = (isRecord(v) && shortName(v.type)) || "unknown";
    if (isRecord(v) && typeof v.id === "string") declared.add(v.id);
    const shape = schemaIssues(Vertex, v);
    for (const s of shape) {
      const code =
        s.path[0] === "id" || s.path[0] === "type" || s.path.length === 0
          ? ValidationCode.INVALID_GRAPH
          : ValidationCode.INVALID_NODE_CONFIG;
      add(code, nodeId, nodeType, [...path, ...s.path], s.message);
    }
    if (shape.length > 0) return;
    const vertex = v as Vertex;
    if (seen.has(vertex.id)) {
      add(
        ValidationCode.DUPLICATE_NODE_ID,
        vertex.id,
        nodeType,
        [...path, "id"],
        `duplicate vertex id "${vertex.id}"`,
      );
      return;
    }
    seen.add(vertex.id);
    if (!isNodeType(vertex.type)) {
      add(
        ValidationCode.UNKNOWN_NODE_TYPE,
        vertex.id,
        nodeType,
        [...path, "type"],
        `unknown node type "${vertex.type}": must be one of ${NODE_TYPES.join(", ")}`,
      );
      return;
    }
    if (vertex.type === "output" && ++outputs > 1) {
      add(
        ValidationCode.MULTIPLE_OUTPUTS,
        vertex.id,
        nodeType,
        [...path, "type"],
        "a flow has at most one output node",
      );
    }
    found.push({ index: i, vertex });
  });
  return declared;
}

function collectEdges(
  raw: unknown[],
  vertexes: readonly FoundVertex[],
  declared: ReadonlySet<string>,
  found: { index: number; edge: Edge }[],
  add: AddFinding,
): void {
  const ids = new Set(vertexes.map((f) => f.vertex.id));
  raw.forEach((e, j) => {
    const path: JsonPath = ["flow", "edges", j];
    const r = isRecord(e) ? e : {};
    const ends = [shortName(r.source), shortName(r.target)];
    const nodeId =
      shortName(r.id) ?? (ends[0] && ends[1] ? `${ends[0]}->${ends[1]}` : `edge #${j}`);
    const shape = schemaIssues(Edge, e);
    for (const s of shape)
      add(ValidationCode.INVALID_GRAPH, nodeId, "edge", [...path, ...s.path], s.message);
    if (shape.length > 0) return;
    const edge = e as Edge;
    let ok = true;
    for (const end of ["source", "target"] as const) {
      if (!ids.has(edge[end])) {
        ok = false;
        if (declared.has(edge[end])) continue;
        add(
          ValidationCode.EDGE_UNKNOWN_VERTEX,
          nodeId,
          "edge",
          [...path, end],
          `edge ${end} "${edge[end]}" is not a vertex`,
        );
      }
    }
    if (edge.when !== undefined) {
      const err = expressionError(edge.when);
      if (err)
        add(
          ValidationCode.INVALID_EXPRESSION,
          nodeId,
          "edge",
          [...path, "when"],
          `invalid JSONata: ${err}`,
        );
    }
    if (ok) found.push({ index: j, edge });
  });
}
