/** `filter {expr}`: keeps the records for which the expression is truthy (JSONata boolean rules). */
import { Type } from "typebox";
import { truthy } from "../expr.ts";
import { GraphName } from "../graph.ts";
import { asRecords, type OperatorDef } from "./types.ts";

export const filter: OperatorDef = {
  type: "filter",
  schema: Type.Object({
    type: Type.Literal("filter"),
    id: Type.Optional(GraphName()),
    expr: Type.String({ minLength: 1 }),
  }),
  expressions: (op) => [{ path: ["expr"], text: op.expr as string }],
  async apply(op, input, ctx) {
    const expr = op.expr as string;
    const kept: unknown[] = [];
    for (const record of asRecords(input)) {
      if (truthy(await ctx.evaluate(expr, record))) kept.push(record);
    }
    return kept;
  },
};
