/** `select {fields: [...]}`: keeps only the listed fields (dotted names read nested values). */
import { Type } from "typebox";
import { GraphName } from "../graph.ts";
import { getField, type OperatorDef, perRecord, type Row } from "./types.ts";

export const select: OperatorDef = {
  type: "select",
  schema: Type.Object({
    type: Type.Literal("select"),
    id: Type.Optional(GraphName()),
    fields: Type.Array(Type.String({ minLength: 1 }), { minItems: 1 }),
  }),
  expressions: () => [],
  apply(op, input) {
    const fields = op.fields as string[];
    return perRecord(input, (record) => {
      const out: Row = {};
      for (const field of fields) {
        const value = getField(record, field);
        if (value !== undefined) out[field] = value;
      }
      return out;
    });
  },
};
