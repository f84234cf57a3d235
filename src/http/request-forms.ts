import type { FastifyInstance, FastifyRequest } from "fastify";
import { badRequest } from "../errors.ts";
import { MAX_JSON_DEPTH, tooDeep } from "../schema/json-depth.ts";
import { jsonPathAt, numberProblem } from "../schema/json-integers.ts";
import { dropDeclaredNulls, isRecord, type ShapeSchema, typesOf } from "../schema/null-absent.ts";

/**
 * The one place where the forms different client serialisers give the same request are made
 * alike, before any schema or handler sees them (docs/errors.md, "How fields are read"):
 *
 * - `null` for a declared field is the field left out (Jackson and System.Text.Json write unset
 *   fields as null). Only fields the route's schema declares are touched: free-form values
 *   (`parameter`, a flow graph's own data) reach the flow or script exactly as sent.
 * - In a query string or a multipart form (formFields) an empty value is the field left out;
 *   integers and booleans are read from their text (a query string has no other way to carry them).
 * - Booleans as text: true/false/1/0 in any letter case (textBoolean, also used for form fields).
 * - An integer past ±(2^53 − 1), which JSON.parse rounds, or a number past a double's range,
 *   which it makes Infinity, is a 400 naming it (src/schema/json-integers.ts).
 * - The body is UTF-8 or the charset its content-type names; other bytes are a 400 (bodyText).
 * - An empty body sent as application/json is no body; a route whose schema types its body
 *   answers "body is required" for it, as for no body or a body of `null`, unless its config says
 *   `bodyOptional` (every field has a default): then it is `{}`.
 */
/** A media type with the `+json` suffix, in any case, with or without parameters. */
const JSON_SUFFIX = /^application\/[\w.!#$&^-]+\+json\s*(?:;.*)?$/i;

export function installRequestForms(app: FastifyInstance): void {
  const parseJson = app.getDefaultJsonParser("error", "error");
  app.removeContentTypeParser("application/json");
  // Fastify reads text/plain as a string: an HTML form's text/plain, or fetch's default for a
  // string body, would reach a free-form body as text. It is refused like any other type.
  app.removeContentTypeParser("text/plain");
  const parser: Parameters<FastifyInstance["addContentTypeParser"]>[2] = (req, body, done) => {
    let text: string;
    try {
      text = bodyText(body as Buffer, req.headers["content-type"]);
    } catch (err) {
      return done(err as Error, undefined);
    }
    if (text.trim() === "") return done(null, undefined);
    parseJson(req, text, (err, value) => {
      if (err) return done(jsonError(text), undefined);
      const problem = parsedBodyProblem(text, value);
      if (problem !== undefined) return done(badRequest(problem), undefined);
      done(null, value);
    });
  };
  app.addContentTypeParser("application/json", { parseAs: "buffer" }, parser);
  // RFC 6839's structured suffix (application/vnd.api+json, application/problem+json): JSON too.
  app.addContentTypeParser(JSON_SUFFIX, { parseAs: "buffer" }, parser);
  app.addHook("preValidation", async (req) => {
    const schema = req.routeOptions.schema;
    if (!schema) return;
    if (schema.querystring && isRecord(req.query)) {
      normalizeQuery(req, req.query, schema.querystring as Schema);
    }
    if (!schema.body) return;
    const body = schema.body as Schema;
    // No body, an empty one or `null` is absent like any other value; where the schema wants a
    // typed body that is its own 400, not "body must be object".
    if (req.body === undefined || req.body === null) {
      if (req.routeOptions.config.bodyOptional) req.body = {};
      else if (typesOf(body).length > 0) throw badRequest("body is required");
      return;
    }
    req.body = dropNulls(req.body, body);
  });
}

/**
 * What a parsed JSON body (or a compressedFlag parameter) may not be, or undefined: nested deeper
 * than MAX_JSON_DEPTH, checked first, since every recursive walk after this (the NUL check, null
 * dropping, validation, a store's JSON.stringify) would overflow the stack, a 400 here and not a
 * 999999; then a number JSON.parse did not keep as sent (docs/errors.md, "Bad input" and "How
 * fields are read"). A text too short to nest that deep (every usual request) is not walked again.
 */
export function parsedBodyProblem(text: string, value: unknown): string | undefined {
  if (tooDeep(text, value)) return `body nests deeper than ${MAX_JSON_DEPTH} levels`;
  return numberProblem(text);
}

/** The charset a content-type names (`; charset=utf-8`, `;charset="UTF-8"`). */
const CHARSET = /;\s*charset\s*=\s*"?([^";\s]*)"?/i;
const UTF8 = new TextDecoder("utf-8", { fatal: true });

/**
 * A JSON body's text (docs/errors.md, "How fields are read"): UTF-8, or the charset its
 * content-type names (a WHATWG encoding label: iso-8859-1, utf-16, …). Bytes that are not of it
 * are a 400 naming the field they are in, never U+FFFD in their place. A leading byte order mark
 * (.NET's StreamWriter with Encoding.UTF8 writes one) is not part of the text: RFC 8259 lets a
 * parser ignore it, and the decoder does. Without a content-type (a compressedFlag parameter,
 * src/http/script-requests.ts) it is UTF-8.
 */
export function bodyText(body: Buffer, contentType: string | undefined): string {
  const label = CHARSET.exec(contentType ?? "")?.[1]?.toLowerCase() ?? "utf-8";
  let decoder = UTF8;
  if (label !== "utf-8" && label !== "utf8") {
    try {
      decoder = new TextDecoder(label, { fatal: true });
    } catch {
      throw badRequest(
        `unsupported charset ${JSON.stringify(label.slice(0, 40))} in content-type; JSON is UTF-8`,
      );
    }
  }
  try {
    return decoder.decode(body);
  } catch {
    if (decoder !== UTF8) throw badRequest(`body is not valid ${decoder.encoding}`);
    throw notUtf8(body, contentType === undefined);
  }
}

/** Where the first byte that is not UTF-8 is, and in which field (an error path only). */
function notUtf8(body: Buffer, compressed: boolean): Error {
  const lossy = body.toString("utf8");
  let at = 0;
  let index = 0;
  for (const ch of lossy) {
    const cp = ch.codePointAt(0) ?? 0;
    // U+FFFD stands for the bytes it replaced, unless those bytes spelled U+FFFD itself.
    if (cp === 0xfffd && !(body[at] === 0xef && body[at + 1] === 0xbf && body[at + 2] === 0xbd))
      break;
    at += cp < 0x80 ? 1 : cp < 0x800 ? 2 : cp < 0x10000 ? 3 : 4;
    index += ch.length;
  }
  const byte = (body[at] ?? 0).toString(16).padStart(2, "0");
  // A key before it that is no JSON string (a bad escape) cannot be named: the body is.
  let where = "body";
  try {
    where = jsonPathAt(lossy, index);
  } catch {}
  return badRequest(
    `${where} is not valid UTF-8 (byte 0x${byte} at offset ${at}); ${compressed ? "compress UTF-8 JSON" : "send JSON as UTF-8, or name its charset in content-type"}`,
  );
}

/** The text of a JSON number: what a query string's integer field is read from. */
const NUMBER_TEXT = /^-?\d+(?:\.\d+)?(?:[eE][+-]?\d+)?$/;

/**
 * Why a body is not JSON, where it is (the parser's own error says only that it is not): the
 * syntax error's text, or the prototype keys the parser refuses (docs/errors.md).
 */
function jsonError(text: string): Error {
  try {
    JSON.parse(text);
  } catch (err) {
    return badRequest(`body is not valid JSON: ${(err as Error).message}`);
  }
  return badRequest(
    "body is not valid JSON: a __proto__ or constructor.prototype key is not allowed",
  );
}

/** A boolean sent as text: true/false/1/0 in any letter case; anything else is undefined. */
export function textBoolean(value: string): boolean | undefined {
  const lower = value.trim().toLowerCase();
  if (lower === "true" || lower === "1") return true;
  if (lower === "false" || lower === "0") return false;
  return undefined;
}

/**
 * The text fields of a multipart form as a handler reads them: an empty value is the field left
 * out, as in a query string (a browser sends every input of a form, an empty one as "").
 */
export function formFields(fields: Record<string, string>): Record<string, string> {
  return Object.fromEntries(Object.entries(fields).filter(([, value]) => value !== ""));
}

/** A form or query boolean: absent when missing or empty, else textBoolean or a 400 naming it. */
export function formBoolean(value: string | undefined, field: string): boolean | undefined {
  if (value === undefined || value === "") return undefined;
  const parsed = textBoolean(value);
  if (parsed === undefined) throw badRequest(`${field} must be true, false, 1 or 0`);
  return parsed;
}

type Schema = ShapeSchema;

function normalizeQuery(req: FastifyRequest, query: Record<string, unknown>, schema: Schema) {
  for (const [key, prop] of Object.entries(schema.properties ?? {})) {
    const value = query[key];
    if (value === "" || value === undefined) {
      delete query[key];
      continue;
    }
    if (typeof value !== "string") continue;
    const types = typesOf(prop);
    if (types.includes("boolean")) {
      const parsed = textBoolean(value);
      if (parsed === undefined) throw badRequest(`querystring.${key} must be true, false, 1 or 0`);
      query[key] = parsed;
    } else if (types.includes("integer") && NUMBER_TEXT.test(value.trim())) {
      // Read as a JSON number would be (`30.0` is 30, as in a body); the schema then refuses
      // what is not an integer, naming the field.
      query[key] = Number(value.trim());
    }
  }
  req.query = query;
}

/**
 * Declared fields holding null become absent (src/schema/null-absent.ts, the walker deploys use
 * for graphs too) and declared booleans sent as text become booleans; every other value keeps
 * its JSON type.
 */
function dropNulls(value: unknown, schema: Schema): unknown {
  return dropDeclaredNulls(value, schema, (field, prop) => {
    const types = typesOf(prop);
    return typeof field === "string" && types.includes("boolean") && !types.includes("string")
      ? (textBoolean(field) ?? field)
      : field;
  });
}
