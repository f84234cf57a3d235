import Fastify, { type FastifyBaseLogger, type FastifyInstance, type FastifyReply } from "fastify";
import type { AppDeps } from "../app-deps.ts";
import { MAX_NAME_BYTES } from "../artifacts/names.ts";
import { ErrorCode, formatMessage, languageOf } from "../errors.ts";
import { fail } from "./envelope.ts";
import { answerClientError } from "./error-handler.ts";

/** A path parameter's longest URL-encoded form: an artifact name of MAX_NAME_BYTES bytes. */
const MAX_PARAM_LENGTH = 3 * MAX_NAME_BYTES;

/**
 * The Fastify instance with the service's options: its logger, body limit, request IDs, schema
 * validation without coercion, router bounds, and an envelope for errors raised before routing.
 */
export function createFastify(deps: Pick<AppDeps, "config" | "logger">): FastifyInstance {
  const { config } = deps;
  return Fastify({
    loggerInstance: deps.logger as FastifyBaseLogger,
    bodyLimit: config.limits.bodyBytes,
    genReqId: (req) => {
      const given = req.headers["x-request-id"];
      return typeof given === "string" && given.length <= 128 ? given : crypto.randomUUID();
    },
    ajv: {
      customOptions: {
        // No coercion: a JSON value of the wrong type is a 400 naming the field; query strings
        // and text booleans are read in one place before validation (docs/errors.md).
        coerceTypes: false,
        useDefaults: true,
        removeAdditional: false,
        allErrors: false,
        // Errors carry their schema, so a range error names both bounds (error-handler.ts).
        verbose: true,
      },
    },
    // An artifact name is one URL-encoded path parameter (docs/artifacts.md): any name within
    // its limit, at three characters a byte encoded, must reach the route (the default is 100).
    routerOptions: { ignoreTrailingSlash: true, maxParamLength: MAX_PARAM_LENGTH },
    clientErrorHandler: answerClientError,
    // Node answers an HTTP/1.1 request without Host with a bare 400; the hook below names it.
    http: { requireHostHeader: false },
    // Errors raised before routing (bad URL encoding, bad content-type header) still get an envelope.
    frameworkErrors: (err, req, reply) => {
      const language = languageOf(req.headers.language);
      // Neither says which parameter; neither repeats the URL, which may be 16 KB long.
      const text =
        err.code === "FST_ERR_BAD_URL"
          ? "malformed URL encoding"
          : err.code === "FST_ERR_MAX_PARAM_LENGTH"
            ? `params: a path parameter is longer than ${MAX_PARAM_LENGTH} characters (URL-encoded)`
            : err.message;
      void (reply as FastifyReply)
        .code(200)
        .send(fail(ErrorCode.BAD_REQUEST, formatMessage(ErrorCode.BAD_REQUEST, [text], language)));
    },
  });
}
