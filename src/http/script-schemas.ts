import { Type } from "typebox";
import { RUN_NAME_MAX } from "../flows/run-name.ts";
import { MAX_VERSION } from "./revision-schemas.ts";
import { CallbackFields, CallbackQueryFields } from "./webhook-schemas.ts";

/** TypeBox schemas of the script service (docs/script-service.md). */

const Str = Type.String();
const Timeout = Type.Integer({ minimum: 0, description: "seconds" });
const ScriptVersion = Type.Integer({
  minimum: 1,
  maximum: MAX_VERSION,
  description: "the script version to run (docs/script-service.md); absent: the newest",
});

export const ExternalParams = Type.Object({ elementName: Type.String({ minLength: 1 }) });

export const ExternalRunQuery = Type.Object({
  path: Type.Optional(Str),
  folderId: Type.Optional(Str),
  taskName: Type.Optional(Type.String({ maxLength: RUN_NAME_MAX })),
  compressedFlag: Type.Optional(Type.Boolean({ default: false })),
  elementType: Type.Optional(Str),
  version: Type.Optional(ScriptVersion),
  ...CallbackQueryFields,
});

export const ExternalRunSyncQuery = Type.Object({
  ...ExternalRunQuery.properties,
  timeout: Type.Optional(Timeout),
  terminateOnTimeout: Type.Optional(Type.Boolean({ default: false })),
});

/** The whole body is the script's parameter; with compressedFlag it is base64 gzip text. */
export const ScriptParameterBody = Type.Unknown({
  description: "free-form JSON: the script's parameter",
});

export const InternalRunBody = Type.Object({
  elementName: Type.String({ minLength: 1 }),
  elementType: Type.Optional(Str),
  parameter: Type.Optional(Type.Unknown()),
  folderId: Type.Optional(Str),
  path: Type.Optional(Str),
  version: Type.Optional(ScriptVersion),
  ...CallbackFields,
});

export const InternalRunSyncBody = Type.Object({
  ...InternalRunBody.properties,
  timeout: Type.Optional(Timeout),
  terminateOnTimeout: Type.Optional(Type.Boolean()),
});

export const TaskParams = Type.Object({ taskId: Type.String({ minLength: 1 }) });
export const WaitQuery = Type.Object({ timeout: Type.Optional(Timeout) });

export const Lifespan = Type.Object({
  success: Type.Boolean(),
  retval: Type.Unknown(),
  stdout: Type.String(),
  stderr: Type.String(),
});

export const UploadItem = Type.Object({
  filePath: Type.String(),
  status: Type.Integer({ description: "0 imported, 1 skipped, 2 rejected, 3 over a size limit" }),
  message: Type.String(),
});
