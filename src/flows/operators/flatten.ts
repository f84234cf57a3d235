/**
 * `flatten {field}`: unnests an array field, one output record per element with the field replaced
 * by that element (records whose field is not an array pass through, an empty array drops the
 * record). Without `field`, nested arrays of the input are flattened one level.
 */
import { Type } from "typebox";
import { GraphName } from "../graph.ts";
import { asRecords, isRow, type OperatorDef } from "./types.ts";

export const flatten: OperatorDef = {
  type: "flatten",
  schema: Type.Object({
    type: Type.Literal("flatten"),
    id: Type.Optional(GraphName()),
    field: Type.Optional(Type.String({ minLength: 1 })),
  }),
  expressions: () => [],
  async apply(op, input) {
    const field = op.field as string | undefined;
    const out: unknown[] = [];
    for (const record of asRecords(input)) {
      if (field === undefined) {
        if (Array.isArray(record)) out.push(...record);
        else out.push(record);
        continue;
      }
      const value = isRow(record) ? record[field] : undefined;
      if (!isRow(record) || !Array.isArray(value)) {
        out.push(record);
        continue;
      }
      for (const item of value) out.push({ ...record, [field]: item });
    }
    return out;
  },
};
