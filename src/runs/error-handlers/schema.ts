import { Type } from "typebox";

/** `errorHandlerResults` items of GET /monitor/run (beyond the interface, docs/flow-graph.md). */
export const ErrorHandlerResultSchema = Type.Object({
  kind: Type.String(),
  ok: Type.Boolean(),
  attempts: Type.Integer(),
  error: Type.Optional(Type.String()),
  at: Type.Integer(),
  event: Type.String(),
  runId: Type.Optional(Type.String()),
});
