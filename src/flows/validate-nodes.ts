/** Deploy-time checks of each node's config (docs/flow-graph.md), once the graph's shape is known. */
import type { Locator } from "../elements/locator.ts";
import { expressionError, templateExpressions } from "./expr.ts";
import { type Edge, joinPrelude } from "./graph.ts";
import { NODES } from "./nodes/index.ts";
import { type JsonPath, schemaIssues } from "./schema-issues.ts";
import { secretIssues } from "./validate-secrets.ts";
import {
  type AddFinding,
  type FoundVertex,
  ValidationCode,
  type ValidationContext,
} from "./validation-codes.ts";

export async function checkNodes(
  vertexes: readonly FoundVertex[],
  edges: readonly { edge: Edge }[],
  /** "" when there is none or it does not parse (then code is checked alone). */
  prelude: string,
  ctx: ValidationContext,
  add: AddFinding,
): Promise<void> {
  for (const { index, vertex } of vertexes) {
    const def = NODES[vertex.type as keyof typeof NODES];
    const base: JsonPath = ["flow", "vertexes", index, "config"];
    const config = vertex.config ?? {};
    const id = vertex.id;
    const shape = schemaIssues(def.configSchema, config);
    for (const s of shape)
      add(ValidationCode.INVALID_NODE_CONFIG, id, vertex.type, [...base, ...s.path], s.message);
    if (shape.length > 0) continue;
    const cfg = config as Record<string, unknown>;
    const sources = edges.filter((e) => e.edge.target === id).map((e) => e.edge.source);
    const issues = def.check?.(cfg, { sources }) ?? [];
    for (const s of issues)
      add(ValidationCode.INVALID_NODE_CONFIG, id, vertex.type, [...base, ...s.path], s.message, s);
    for (const e of def.expressions?.(cfg) ?? []) {
      let texts: string[];
      try {
        texts = e.kind === "template" ? templateExpressions(e.text) : [e.text];
      } catch (err) {
        add(
          ValidationCode.INVALID_EXPRESSION,
          id,
          vertex.type,
          [...base, ...e.path],
          (err as Error).message,
          e,
        );
        continue;
      }
      for (const text of texts) {
        const err = expressionError(text);
        if (err)
          add(
            ValidationCode.INVALID_EXPRESSION,
            id,
            vertex.type,
            [...base, ...e.path],
            `invalid JSONata "${text}": ${err}`,
            e,
          );
      }
    }
    if (issues.length > 0) continue;
    const element = cfg.element as Locator | undefined;
    if (element && (vertex.type === "script" || vertex.type === "subflow")) {
      const type = vertex.type === "script" ? "PY" : "DPL";
      if (!(await ctx.elementExists(element, type))) {
        add(
          ValidationCode.ELEMENT_NOT_FOUND,
          id,
          vertex.type,
          [...base, "element"],
          `${type} element ${element.elementName} does not exist`,
        );
      }
    }
    for (const s of await secretIssues(vertex.type, cfg, ctx))
      add(ValidationCode.UNKNOWN_SECRET, id, vertex.type, [...base, ...s.path], s.message);
    if (vertex.type === "script" && typeof cfg.code === "string") {
      const joined = joinPrelude(prelude, cfg.code);
      const err = await ctx.checkPythonSyntax(joined.code);
      if (err) {
        // Lines are counted in the user's code, not in the prelude + code that Python saw.
        const msg =
          err.line === undefined
            ? err.message
            : `Python syntax error at line ${Math.max(1, err.line - joined.lineOffset)}: ${err.message}`;
        add(ValidationCode.PYTHON_SYNTAX_ERROR, id, vertex.type, [...base, "code"], msg);
      }
    }
  }
}
