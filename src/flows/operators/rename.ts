/** `rename {mapping: {oldName: newName}}`: renames fields in place, keeping field order. */
import { Type } from "typebox";
import { GraphName } from "../graph.ts";
import { isRow, type OperatorDef, perRecord, type Row } from "./types.ts";

export const rename: OperatorDef = {
  type: "rename",
  schema: Type.Object({
    type: Type.Literal("rename"),
    id: Type.Optional(GraphName()),
    mapping: Type.Record(Type.String({ minLength: 1 }), Type.String({ minLength: 1 })),
  }),
  expressions: () => [],
  apply(op, input) {
    const mapping = op.mapping as Record<string, string>;
    return perRecord(input, (record) => {
      if (!isRow(record)) return record;
      const out: Row = {};
      for (const [key, value] of Object.entries(record)) out[mapping[key] ?? key] = value;
      return out;
    });
  },
};
