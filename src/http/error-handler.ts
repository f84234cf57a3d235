import type { FastifyError, FastifyInstance, FastifyReply, FastifyRequest } from "fastify";
import {
  ErrorCode,
  type ErrorCodeValue,
  formatMessage,
  type Language,
  languageOf,
  SluiceError,
} from "../errors.ts";
import { fail } from "./envelope.ts";

/**
 * The one place errors become envelopes. Every answer is HTTP 200 (contract §3); internals of an
 * unexpected error are logged, never sent.
 */
export function installErrorHandler(app: FastifyInstance): void {
  app.setErrorHandler(
    (err: FastifyError | SluiceError, req: FastifyRequest, reply: FastifyReply) => {
      const language: Language = req.ctx?.language ?? languageOf(req.headers.language);
      if (err instanceof SluiceError) {
        if (err.code === ErrorCode.BUSINESS) req.log.warn({ err }, "business failure");
        reply.headers(err.headers);
        return reply.code(200).send(fail(err.code, err.messageIn(language)));
      }
      const mapped = mapFastifyError(err);
      if (mapped) {
        return reply
          .code(200)
          .send(fail(mapped.code, formatMessage(mapped.code, [mapped.text], language)));
      }
      req.log.error({ err }, "unexpected error");
      return reply
        .code(200)
        .send(
          fail(ErrorCode.BUSINESS, formatMessage(ErrorCode.BUSINESS, ["internal error"], language)),
        );
    },
  );

  app.setNotFoundHandler((req, reply) => {
    const language = languageOf(req.headers.language);
    reply
      .code(200)
      .send(
        fail(
          ErrorCode.NOT_FOUND,
          formatMessage(ErrorCode.NOT_FOUND, [`${req.method} ${req.url.split("?")[0]}`], language),
        ),
      );
  });
}

function mapFastifyError(err: FastifyError): { code: ErrorCodeValue; text: string } | null {
  if (err.validation) {
    return { code: ErrorCode.BAD_REQUEST, text: describeValidation(err) };
  }
  switch (err.code) {
    case "FST_ERR_CTP_BODY_TOO_LARGE":
    case "FST_REQ_FILE_TOO_LARGE":
    case "FST_FILES_LIMIT":
    case "FST_PARTS_LIMIT":
      return { code: ErrorCode.TOO_LARGE, text: err.message };
    case "FST_ERR_CTP_INVALID_MEDIA_TYPE":
      return { code: ErrorCode.BAD_REQUEST, text: `unsupported content type` };
    case "FST_ERR_CTP_EMPTY_JSON_BODY":
      return {
        code: ErrorCode.BAD_REQUEST,
        text: "body must not be empty when content-type is application/json",
      };
    case "FST_ERR_CTP_INVALID_JSON_BODY":
      return { code: ErrorCode.BAD_REQUEST, text: `body is not valid JSON: ${err.message}` };
    case "FST_ERR_BAD_URL":
      return { code: ErrorCode.BAD_REQUEST, text: "malformed URL encoding" };
  }
  if (err instanceof SyntaxError)
    return { code: ErrorCode.BAD_REQUEST, text: `body is not valid JSON: ${err.message}` };
  if (err.code === "Z_DATA_ERROR" || err.code === "Z_BUF_ERROR") {
    return { code: ErrorCode.BAD_REQUEST, text: "body is not valid gzip or deflate data" };
  }
  if (err.statusCode === 413) return { code: ErrorCode.TOO_LARGE, text: err.message };
  if (err.statusCode && err.statusCode >= 400 && err.statusCode < 500) {
    return { code: ErrorCode.BAD_REQUEST, text: err.message };
  }
  return null;
}

/** "body.timeout must be integer": the field first, then what is wrong with it. */
function describeValidation(err: FastifyError): string {
  const first = err.validation?.[0];
  if (!first) return err.message;
  const where = err.validationContext ?? "body";
  const params = first.params as Record<string, unknown>;
  const missing = typeof params.missingProperty === "string" ? params.missingProperty : undefined;
  const field = `${where}${first.instancePath.replaceAll("/", ".")}${missing ? `.${missing}` : ""}`;
  if (missing) return `${field} is required`;
  if (typeof params.additionalProperty === "string")
    return `${field}.${params.additionalProperty} is not allowed`;
  return `${field} ${first.message ?? "is invalid"}`;
}
