/**
 * `map {fields: {name: expr}}`: adds or overwrites the listed fields and keeps the others. A field
 * whose expression yields nothing (undefined) is left out, as JSONata leaves it out of objects.
 */
import { Type } from "typebox";
import { GraphName } from "../graph.ts";
import { isRow, type OperatorDef, perRecord, type Row } from "./types.ts";

export const map: OperatorDef = {
  type: "map",
  schema: Type.Object({
    type: Type.Literal("map"),
    id: Type.Optional(GraphName()),
    fields: Type.Record(Type.String({ minLength: 1 }), Type.String({ minLength: 1 })),
  }),
  expressions: (op) =>
    Object.entries(op.fields as Record<string, string>).map(([name, text]) => ({
      path: ["fields", name],
      text,
    })),
  apply(op, input, ctx) {
    const fields = Object.entries(op.fields as Record<string, string>);
    return perRecord(input, async (record) => {
      const out: Row = isRow(record) ? { ...record } : {};
      for (const [name, text] of fields) {
        const value = await ctx.evaluate(text, record);
        if (value === undefined) delete out[name];
        else out[name] = value;
      }
      return out;
    });
  },
};
