/** Deploy-time checks of each node's config (docs/flow-graph.md), once the graph's shape is known. */
import type { Locator } from "../elements/locator.ts";
import { expressionError, templateExpressions } from "./expr.ts";
import { type Edge, joinPrelude } from "./graph.ts";
import { NODES } from "./nodes/index.ts";
import type { ConfigIssue, NodeDef } from "./nodes/types.ts";
import { type JsonPath, schemaIssues, unreadFields } from "./schema-issues.ts";
import { secretIssues } from "./validate-secrets.ts";
import {
  type AddFinding,
  type FoundVertex,
  Severity,
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
    for (const s of unread(vertex.type, def, cfg))
      add(
        ValidationCode.INVALID_NODE_CONFIG,
        id,
        vertex.type,
        [...base, ...s.path],
        s.message,
        s,
        Severity.WARNING,
      );
    const element = cfg.element as Locator | undefined;
    if (element && (vertex.type === "script" || vertex.type === "subflow")) {
      const type = vertex.type === "script" ? "PY" : "DPL";
      const found = await ctx.elementExists(element, type);
      if (found !== true) {
        add(
          ValidationCode.ELEMENT_NOT_FOUND,
          id,
          vertex.type,
          [...base, "element"],
          missingElement(`${type} element`, element, found),
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

/**
 * Why a locator names no element (docs/flow-graph.md, 28050008): where it was looked for, or the
 * lookup's own reason (a name several folders hold: give `path` or `folderId`).
 */
export function missingElement(label: string, loc: Locator, found: false | string): string {
  const named =
    loc.elementName !== undefined ? `${label} ${loc.elementName}` : `${label} ${loc.elementId}`;
  if (typeof found === "string") return `${named}: ${found}`;
  const folder = loc.path ?? loc.folderId;
  return `${named} does not exist ${folder !== undefined ? `in folder ${folder}` : "in this space"}`;
}

/**
 * A config's fields the node does not read, as warnings (docs/flow-graph.md, 28050006): a typo
 * (`timeout` for `timeoutSeconds`) deploys, and would otherwise do nothing without a word.
 */
function unread(type: string, def: NodeDef, config: Record<string, unknown>): ConfigIssue[] {
  if (def.unread) return def.unread(config);
  const a = ["input", "http", "output"].includes(type) ? "an" : "a";
  return unreadFields(def.configSchema, config).map((path) => ({
    path,
    message:
      type === "script" && path.length === 2 && path[0] === "element" && path[1] === "version"
        ? "is not read: a script node runs the version pinned when the revision becomes the release; activate the flow to pin the newest version"
        : `is not a field of ${a} ${type} node and is ignored`,
  }));
}
