/**
 * `sort {by: [{field, asc}]}`: stable multi-key sort; `asc` defaults to true. Numbers compare
 * numerically, strings by code point, and missing/null values sort last in either direction.
 */
import { Type } from "typebox";
import { GraphName } from "../graph.ts";
import { asRecords, getField, type OperatorDef } from "./types.ts";

function compare(a: unknown, b: unknown): number {
  if (typeof a === "number" && typeof b === "number") return a - b;
  if (typeof a === "boolean" && typeof b === "boolean") return Number(a) - Number(b);
  const sa = typeof a === "string" ? a : JSON.stringify(a);
  const sb = typeof b === "string" ? b : JSON.stringify(b);
  return sa < sb ? -1 : sa > sb ? 1 : 0;
}

export const sort: OperatorDef = {
  type: "sort",
  schema: Type.Object({
    type: Type.Literal("sort"),
    id: Type.Optional(GraphName()),
    by: Type.Array(
      Type.Object({ field: Type.String({ minLength: 1 }), asc: Type.Optional(Type.Boolean()) }),
      { minItems: 1 },
    ),
  }),
  expressions: () => [],
  async apply(op, input) {
    const by = op.by as { field: string; asc?: boolean }[];
    return [...asRecords(input)].sort((x, y) => {
      for (const { field, asc } of by) {
        const a = getField(x, field);
        const b = getField(y, field);
        const aMissing = a === undefined || a === null;
        const bMissing = b === undefined || b === null;
        if (aMissing || bMissing) {
          if (aMissing !== bMissing) return aMissing ? 1 : -1;
          continue;
        }
        const c = compare(a, b);
        if (c !== 0) return asc === false ? -c : c;
      }
      return 0;
    });
  },
};
