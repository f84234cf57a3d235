/** `transform`: a chain of JSONata-based operators over the node input. */
import { Type } from "typebox";
import { MAX_NAME_LENGTH, shortName } from "../graph.ts";
import { OPERATORS, operatorDef } from "../operators/index.ts";
import { schemaIssues, unreadFields } from "../schema-issues.ts";
import type { ConfigExpression, ConfigIssue, NodeDef } from "./types.ts";

type Op = Record<string, unknown>;
// A finding repeats an operator's ID and type only when they are names (docs/flow-graph.md).
const opInfo = (op: Op) => ({
  operatorId: shortName(op.id),
  operatorType: shortName(op.type),
});

export const transformNode: NodeDef = {
  type: "transform",
  // Operators are checked one by one in `check`, so that findings carry operatorId/operatorType.
  configSchema: Type.Object({ operators: Type.Array(Type.Object({ type: Type.String() })) }),
  check(config) {
    const issues: ConfigIssue[] = [];
    (config.operators as Op[]).forEach((op, i) => {
      const def = operatorDef(op.type);
      if (!def) {
        const named = shortName(op.type);
        issues.push({
          path: ["operators", i, "type"],
          message:
            named === undefined
              ? `must NOT have more than ${MAX_NAME_LENGTH} characters`
              : `unknown operator type "${named}": must be one of ${Object.keys(OPERATORS).join(", ")}`,
          ...opInfo(op),
        });
        return;
      }
      for (const issue of schemaIssues(def.schema, op)) {
        issues.push({
          path: ["operators", i, ...issue.path],
          message: issue.message,
          ...opInfo(op),
        });
      }
    });
    return issues;
  },
  expressions(config) {
    const out: ConfigExpression[] = [];
    (config.operators as Op[]).forEach((op, i) => {
      const def = operatorDef(op.type);
      if (!def || schemaIssues(def.schema, op).length > 0) return;
      for (const e of def.expressions(op)) {
        out.push({ path: ["operators", i, ...e.path], text: e.text, kind: "expr", ...opInfo(op) });
      }
    });
    return out;
  },
  unread(config) {
    return (config.operators as Op[]).flatMap((op, i) => {
      const def = operatorDef(op.type);
      if (!def || schemaIssues(def.schema, op).length > 0) return [];
      return unreadFields(def.schema, op).map((path) => ({
        path: ["operators", i, ...path],
        message: `is not a field of a ${def.type} operator and is ignored`,
        ...opInfo(op),
      }));
    });
  },
  run(ctx) {
    return ctx.deps.expressions.transform(ctx.config.operators as Op[], ctx.input, ctx.params);
  },
};
