/** `expr {expr}`: one JSONata expression over the whole input; its value is the output. */
import { Type } from "typebox";
import { GraphName } from "../graph.ts";
import type { OperatorDef } from "./types.ts";

export const expr: OperatorDef = {
  type: "expr",
  schema: Type.Object({
    type: Type.Literal("expr"),
    id: Type.Optional(GraphName()),
    expr: Type.String({ minLength: 1 }),
  }),
  expressions: (op) => [{ path: ["expr"], text: op.expr as string }],
  async apply(op, input, ctx) {
    const value = await ctx.evaluate(op.expr as string, input);
    // JSONata marks result sequences with extra properties; a plain copy keeps outputs plain JSON.
    return Array.isArray(value) ? [...value] : (value ?? null);
  },
};
