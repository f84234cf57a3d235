import { Type } from "typebox";
import { AUDIT_OUTCOMES } from "../audit/types.ts";

/** TypeBox schemas of the audit trail (docs/audit.md). */

const Int = Type.Integer();
const Opt = Type.Optional;
/** Compared in the store (a PostgreSQL `bigint`): past 2^53 − 1 is a 400, not a 999999. */
const EpochMs = (description: string) =>
  Type.Integer({ minimum: 0, maximum: Number.MAX_SAFE_INTEGER, description });
const [SUCCESS, FAILURE, ACCEPTED, REFUSED] = AUDIT_OUTCOMES;
const Outcome = Type.Union([
  Type.Literal(SUCCESS),
  Type.Literal(FAILURE),
  Type.Literal(ACCEPTED),
  Type.Literal(REFUSED),
]);

export const AuditQuery = Type.Object({
  from: Opt(EpochMs("entries at or after this epoch ms")),
  to: Opt(EpochMs("entries at or before this epoch ms")),
  user: Opt(Type.String({ minLength: 1, maxLength: 200 })),
  action: Opt(
    Type.String({
      minLength: 1,
      maxLength: 200,
      description: "deploy, activate, deactivate, terminate, delete, upload, secret-put, …",
    }),
  ),
  outcome: Opt(Outcome),
  pageNo: Type.Integer({ minimum: 0, default: 0 }),
  pageSize: Type.Integer({ minimum: 1, maximum: 100, default: 20 }),
});

export const AuditEntrySchema = Type.Object({
  id: Type.String(),
  at: Type.Integer({ description: "epoch ms the answer was sent" }),
  app: Type.String(),
  space: Type.String(),
  user: Type.Union([Type.String(), Type.Null()]),
  address: Type.Union([Type.String(), Type.Null()], { description: "the client's address" }),
  method: Type.String(),
  route: Type.String({ description: "route pattern, e.g. /dataflow-3-0/secret/:name" }),
  action: Type.String(),
  target: Type.Record(Type.String(), Type.Unknown(), {
    description: "identifiers the change named (never a body, never a secret's value)",
  }),
  outcome: Outcome,
  code: Type.Union([Int, Type.Null()], { description: "the answer's envelope code" }),
  httpStatus: Int,
  durationMs: Int,
  requestId: Type.Union([Type.String(), Type.Null()]),
});

export const AuditPageSchema = Type.Object({
  totalCount: Int,
  totalPage: Int,
  entries: Type.Array(AuditEntrySchema),
});
