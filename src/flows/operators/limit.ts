/** `limit {count, offset}`: a page of the records (offset defaults to 0). */
import { Type } from "typebox";
import { GraphName } from "../graph.ts";
import { asRecords, type OperatorDef } from "./types.ts";

export const limit: OperatorDef = {
  type: "limit",
  schema: Type.Object({
    type: Type.Literal("limit"),
    id: Type.Optional(GraphName()),
    count: Type.Integer({ minimum: 0 }),
    offset: Type.Optional(Type.Integer({ minimum: 0 })),
  }),
  expressions: () => [],
  async apply(op, input) {
    const offset = (op.offset as number | undefined) ?? 0;
    return asRecords(input).slice(offset, offset + (op.count as number));
  },
};
