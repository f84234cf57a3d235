import { gunzipSync } from "node:zlib";
import type { FastifyRequest } from "fastify";
import type { Static } from "typebox";
import type { Config } from "../config.ts";
import { badRequest, ErrorCode, SluiceError } from "../errors.ts";
import type { TaskRequest } from "../scripts/task-service.ts";
import { scopeOf } from "./context.ts";
import { bodyText, parsedBodyProblem } from "./request-forms.ts";
import type { ExternalRunQuery, InternalRunBody } from "./script-schemas.ts";
import { callbackOf } from "./webhook-schemas.ts";

/**
 * How a script run call becomes a task request: locator, parameter, version
 * (docs/script-service.md). External calls carry the element in the path, internal ones in the body.
 */

/** The task request of an external call: element in the path, the whole body as parameter. */
export function externalRequest(
  req: FastifyRequest<{
    Params: { elementName: string };
    Querystring: Static<typeof ExternalRunQuery>;
  }>,
  config: Config,
): Omit<TaskRequest, "trigger"> {
  const q = req.query;
  return {
    scope: scopeOf(req),
    user: req.ctx.user,
    locator: {
      elementName: req.params.elementName,
      elementType: pyType(q.elementType),
      path: q.path,
      folderId: q.folderId,
    },
    parameter: decodeParameter(req.body, q.compressedFlag ?? false, config.limits.bodyBytes),
    taskName: q.taskName,
    version: q.version,
    callback: callbackOf(q, "querystring"),
  };
}

/** The task request of an internal call: locator and parameter in the body. */
export function internalRequest(
  req: FastifyRequest<{ Body: Static<typeof InternalRunBody> }>,
): Omit<TaskRequest, "trigger"> {
  const b = req.body;
  return {
    scope: scopeOf(req),
    user: req.ctx.user,
    locator: {
      elementName: b.elementName,
      elementType: pyType(b.elementType),
      path: b.path,
      folderId: b.folderId,
    },
    parameter: b.parameter ?? {},
    version: b.version,
    callback: callbackOf(b, "body"),
  };
}

function pyType(elementType: string | undefined): "PY" {
  if (elementType !== undefined && elementType !== "PY")
    throw badRequest(`elementType must be PY, got "${elementType}"`);
  return "PY";
}

/** compressedFlag: the body is a JSON string of base64(gzip(UTF-8 JSON)) (docs/script-service.md). */
export function decodeParameter(body: unknown, compressed: boolean, limitBytes: number): unknown {
  if (!compressed) return body ?? {};
  if (typeof body !== "string")
    throw badRequest("body must be a base64 string when compressedFlag is true");
  let inflated: Buffer;
  try {
    inflated = gunzipSync(Buffer.from(body, "base64"), { maxOutputLength: limitBytes });
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === "ERR_BUFFER_TOO_LARGE") {
      throw new SluiceError(ErrorCode.TOO_LARGE, [
        `compressed body inflates past ${limitBytes} bytes`,
      ]);
    }
    throw badRequest("body is not base64 gzip data (compressedFlag is true)");
  }
  // UTF-8 (docs/script-service.md): bytes that are not are a 400 naming the field, as in a body.
  const text = bodyText(inflated, undefined);
  let parameter: unknown;
  try {
    parameter = JSON.parse(text);
  } catch {
    throw badRequest("body: the decompressed parameters are not valid JSON");
  }
  // As for a body sent as it is.
  const problem = parsedBodyProblem(text, parameter);
  if (problem !== undefined) throw badRequest(problem);
  return parameter;
}
