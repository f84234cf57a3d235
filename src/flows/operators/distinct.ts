/**
 * `distinct {fields}`: keeps the first record of each distinct combination of `fields`; without
 * fields, whole records are compared. Comparison is by JSON value, so 1 and "1" differ.
 */
import { Type } from "typebox";
import { GraphName } from "../graph.ts";
import { asRecords, getField, type OperatorDef } from "./types.ts";

export const distinct: OperatorDef = {
  type: "distinct",
  schema: Type.Object({
    type: Type.Literal("distinct"),
    id: Type.Optional(GraphName()),
    fields: Type.Optional(Type.Array(Type.String({ minLength: 1 }))),
  }),
  expressions: () => [],
  async apply(op, input) {
    const fields = op.fields as string[] | undefined;
    const seen = new Set<string>();
    const out: unknown[] = [];
    for (const record of asRecords(input)) {
      const key =
        fields && fields.length > 0
          ? JSON.stringify(fields.map((f) => getField(record, f) ?? null))
          : JSON.stringify(record);
      if (!seen.has(key)) {
        seen.add(key);
        out.push(record);
      }
    }
    return out;
  },
};
