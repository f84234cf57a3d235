import { Type } from "typebox";
import { CallbackFields } from "./webhook-schemas.ts";

/** TypeBox schemas of the data-flow service (docs/dataflow-service.md). */

const Str = Type.String();
const ElementId = Type.Union([Type.String(), Type.Integer()]);
export const Description = Type.Record(Type.String(), Type.String(), {
  description: "ElementDescription: locale → title",
});

export const FlowElementInfo = Type.Object({
  elementName: Type.String({ minLength: 1 }),
  elementType: Type.Optional(Str),
  folderId: Type.Optional(Str),
  path: Type.Optional(Str),
  elementId: Type.Optional(ElementId),
});

const RunFields = {
  elementName: Type.Optional(Type.String({ minLength: 1 })),
  elementType: Type.Optional(Str),
  folderId: Type.Optional(Str),
  path: Type.Optional(Str),
  elementId: Type.Optional(ElementId),
  parameter: Type.Optional(Type.Unknown()),
  inProcess: Type.Optional(Type.Boolean()),
  parentRunId: Type.Optional(Str),
  ...CallbackFields,
};

/** RunWithInfo | RunWithId: one object schema; the handler requires elementName or elementId. */
export const RunBody = Type.Object(RunFields);
export const RunSyncBody = Type.Object({
  ...RunFields,
  timeout: Type.Optional(Type.Integer({ minimum: 0 })),
});

export const RunIdParams = Type.Object({ runId: Type.String({ minLength: 1 }) });
export const WaitQuery = Type.Object({ timeout: Type.Optional(Type.Integer({ minimum: 0 })) });
export const RunIdsBody = Type.Object({ runIds: Type.Array(Type.String(), { maxItems: 1000 }) });
export const RunIdMap = Type.Record(Type.String(), Type.Boolean());

export const DeployBody = Type.Object({
  elementName: Type.String({ minLength: 1 }),
  // Bounded: a rename (no flow) stores it without LIMIT_STORED_BYTES_PER_APP's check (docs/security.md).
  revisionName: Type.String({ minLength: 1, maxLength: 1024 }),
  flow: Type.Optional(
    Type.Object({}, { additionalProperties: true, description: "Graph: {vertexes, edges}" }),
  ),
  configure: Type.Optional(
    Type.Object({}, { additionalProperties: true, description: "Configure" }),
  ),
  elementType: Type.Optional(Str),
  folderId: Type.Optional(Str),
  path: Type.Optional(Str),
  elementId: Type.Optional(ElementId),
  description: Type.Optional(Description),
  release: Type.Optional(
    Type.Boolean({
      description:
        "false: store the revision without making it the release (staged); activate it with its version. Default true.",
    }),
  ),
});

/** FlowElementInfo plus the revision to release (docs/dataflow-service.md, "Revisions and releases"). */
export const ActivateBody = Type.Object({
  ...FlowElementInfo.properties,
  version: Type.Optional(
    Type.Integer({
      minimum: 1,
      maximum: 2_147_483_647,
      description:
        "the revision to make the release; older than the current release: a rollback. Absent: the current release.",
    }),
  ),
});

export const ValidationResult = Type.Object({
  errorCode: Type.Integer(),
  nodeId: Type.String(),
  nodeType: Type.String(),
  errorMessage: Type.Optional(Type.String()),
  severity: Type.Optional(Type.Integer()),
  operatorId: Type.Optional(Type.String()),
  operatorType: Type.Optional(Type.String()),
  path: Type.Optional(Type.Array(Type.Union([Type.String(), Type.Integer()]))),
});

export const BatchDeployResult = Type.Object({
  element: FlowElementInfo,
  result: Type.Union([Type.Literal("OK"), Type.Literal("ERROR"), Type.Literal("SKIP")]),
  message: Type.Optional(Type.String()),
});

export const FlowStatus = Type.Union([
  Type.Literal("DRAFT"),
  Type.Literal("APPROVED"),
  Type.Literal("OBSOLETE"),
]);
