import type { IncomingMessage, ServerResponse } from "node:http";
import type { Duplex } from "node:stream";
import type { FastifyError, FastifyInstance, FastifyReply, FastifyRequest } from "fastify";
import type { Clock } from "../clock.ts";
import {
  ErrorCode,
  type ErrorCodeValue,
  formatMessage,
  type Language,
  languageOf,
  SluiceError,
} from "../errors.ts";
import { type DiscardLimits, discardUnreadBody } from "./discard-body.ts";
import { fail } from "./envelope.ts";

/**
 * The one place errors become envelopes. Every answer is HTTP 200 (docs/errors.md); internals of an
 * unexpected error are logged, never sent.
 */
export function installErrorHandler(
  app: FastifyInstance,
  opts: { clock: Clock; discard: DiscardLimits },
): void {
  app.setErrorHandler(
    (err: FastifyError | SluiceError, req: FastifyRequest, reply: FastifyReply) => {
      const language: Language = req.ctx?.language ?? languageOf(req.headers.language);
      const body = envelopeOf(err, req, reply, language);
      // A failure envelope is not the route's success shape (the root endpoints answer bare
      // JSON): serialized against that schema it would become a 500.
      // With a serializer of its own a reply gets no content type from Fastify: said here, so
      // every client reads the envelope as JSON (a route may have set another type before failing).
      reply.serializer(JSON.stringify).type("application/json; charset=utf-8");
      // An error found before the body was read (a 413 on content-length, a broken encoding):
      // the client may still be writing it, and must be able to read this answer.
      if (req.raw.complete) return reply.code(200).send(body);
      return discardUnreadBody(req.raw, opts.discard, opts.clock).then(() =>
        reply.code(200).send(body),
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

function envelopeOf(
  err: FastifyError | SluiceError,
  req: FastifyRequest,
  reply: FastifyReply,
  language: Language,
): ReturnType<typeof fail> {
  if (err instanceof SluiceError) {
    if (err.code === ErrorCode.BUSINESS) req.log.warn({ err }, "business failure");
    reply.headers(err.headers);
    return fail(err.code, err.messageIn(language));
  }
  const mapped = mapFastifyError(err, req.headers["content-type"], language);
  if (mapped) return fail(mapped.code, formatMessage(mapped.code, [mapped.text], language));
  req.log.error({ err }, "unexpected error");
  return fail(ErrorCode.BUSINESS, formatMessage(ErrorCode.BUSINESS, ["internal error"], language));
}

function mapFastifyError(
  err: FastifyError,
  contentType: string | undefined,
  language: Language,
): { code: ErrorCodeValue; text: string } | null {
  if (err.validation) {
    return { code: ErrorCode.BAD_REQUEST, text: describeValidation(err, language) };
  }
  switch (err.code) {
    case "FST_ERR_CTP_BODY_TOO_LARGE":
    case "FST_REQ_FILE_TOO_LARGE":
    case "FST_FILES_LIMIT":
    case "FST_PARTS_LIMIT":
      return { code: ErrorCode.TOO_LARGE, text: err.message };
    case "FST_ERR_CTP_INVALID_MEDIA_TYPE":
      // curl -d sends application/x-www-form-urlencoded unless told otherwise: say what was
      // received and what is read.
      return {
        code: ErrorCode.BAD_REQUEST,
        text: `${contentType ? `unsupported content type ${JSON.stringify(contentType.slice(0, 100))}` : "a body needs a content-type"}; bodies are application/json (uploads multipart/form-data)`,
      };
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

/**
 * The schema errors a caller meets most, in the `language` header's locale (docs/errors.md, "400
 * messages"); field names and allowed values stay as sent, so that a client can match them.
 */
const PHRASES = {
  en: {
    required: (f: string) => `${f} is required`,
    oneOf: (f: string, v: string) => `${f} must be one of ${v}`,
    range: (f: string, a: number, b: number) => `${f} must be from ${a} to ${b}`,
  },
  "zh-cn": {
    required: (f: string) => `${f} 为必填项`,
    oneOf: (f: string, v: string) => `${f} 必须是以下值之一：${v}`,
    range: (f: string, a: number, b: number) => `${f} 必须在 ${a} 到 ${b} 之间`,
  },
} as const;

/** "body.timeout must be integer": the field first, then what is wrong with it. */
function describeValidation(err: FastifyError, language: Language): string {
  const say = PHRASES[language];
  const first = err.validation?.[0];
  if (!first) return err.message;
  const where = err.validationContext ?? "body";
  const params = first.params as Record<string, unknown>;
  const missing = typeof params.missingProperty === "string" ? params.missingProperty : undefined;
  const field = `${where}${first.instancePath.replaceAll("/", ".")}${missing ? `.${missing}` : ""}`;
  if (missing) return say.required(field);
  if (typeof params.additionalProperty === "string")
    return `${field}.${params.additionalProperty} is not allowed`;
  const allowed = allowedValues(err.validation ?? [], first.instancePath);
  if (allowed.length > 0) return say.oneOf(field, allowed.join(", "));
  const range = rangeOf(first);
  if (range) return say.range(field, range[0], range[1]);
  return `${field} ${first.message ?? "is invalid"}`;
}

/**
 * A number bounded on both sides names both bounds (`body.pageSize must be from 1 to 100`), not
 * only the one it crossed. Ajv's `verbose` option puts the failing schema on the error.
 */
function rangeOf(e: NonNullable<FastifyError["validation"]>[number]): [number, number] | undefined {
  if (e.keyword !== "minimum" && e.keyword !== "maximum") return undefined;
  const schema = (e as { parentSchema?: { minimum?: unknown; maximum?: unknown } }).parentSchema;
  const { minimum, maximum } = schema ?? {};
  return typeof minimum === "number" && typeof maximum === "number"
    ? [minimum, maximum]
    : undefined;
}

/**
 * An enum, or a union of constants (each branch fails with its own `const` error), names every
 * value it accepts (docs/errors.md).
 */
function allowedValues(
  errors: NonNullable<FastifyError["validation"]>,
  instancePath: string,
): string[] {
  const values: string[] = [];
  for (const e of errors) {
    if (e.instancePath !== instancePath) continue;
    const p = e.params as { allowedValue?: unknown; allowedValues?: unknown };
    if (e.keyword === "const") values.push(String(p.allowedValue));
    if (e.keyword === "enum" && Array.isArray(p.allowedValues))
      values.push(...p.allowedValues.map(String));
  }
  return values;
}

/**
 * Node's `checkExpectation`: a request whose `Expect` is not `100-continue` never reaches a route;
 * without this Node answers a bare 417 with no body. It gets an envelope naming the header
 * (docs/errors.md), and the connection closes, since its body was not read.
 */
export function answerExpectation(req: IncomingMessage, res: ServerResponse): void {
  const expect = String(req.headers.expect ?? "").slice(0, 100);
  const text = `unsupported Expect header ${JSON.stringify(expect)}; only 100-continue is understood`;
  const language = languageOf(req.headers.language);
  const body = JSON.stringify(
    fail(ErrorCode.BAD_REQUEST, formatMessage(ErrorCode.BAD_REQUEST, [text], language)),
  );
  res.shouldKeepAlive = false;
  res.writeHead(200, {
    "content-type": "application/json; charset=utf-8",
    "content-length": Buffer.byteLength(body),
  });
  res.end(body);
}

/**
 * Fastify's `clientErrorHandler`: a message Node's HTTP parser rejects (a NUL in a header, broken
 * chunk framing, oversized headers) never becomes a request, so the error handler above never
 * sees it. It still gets an envelope (docs/errors.md), then the connection closes, since the rest
 * of the stream cannot be framed.
 */
export function answerClientError(err: Error & { code?: string }, socket: Duplex): void {
  if (err.code === "ECONNRESET" || !socket.writable) {
    socket.destroy();
    return;
  }
  const code = err.code === "HPE_HEADER_OVERFLOW" ? ErrorCode.TOO_LARGE : ErrorCode.BAD_REQUEST;
  const text =
    err.code === "ERR_HTTP_REQUEST_TIMEOUT"
      ? "the request was not received in time"
      : `malformed HTTP request (${err.code ?? "parse error"})`;
  const body = JSON.stringify(fail(code, formatMessage(code, [text], "en")));
  socket.end(
    "HTTP/1.1 200 OK\r\nconnection: close\r\ncontent-type: application/json; charset=utf-8\r\n" +
      `content-length: ${Buffer.byteLength(body)}\r\n\r\n${body}`,
  );
}
