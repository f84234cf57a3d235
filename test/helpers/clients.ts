import { type Reply, scopeHeaders, type TestServer } from "./server.ts";

/**
 * One logical request written the way different client serialisers write it (docs/errors.md,
 * "How fields are read"). A request is built from `dto(required, optional, unset)`: the fields
 * the caller set and the optional fields of its class it left unset. Free-form values (a run's
 * `parameter`) are plain objects and are written as they are.
 */

/**
 * An object of a client's request class: the required fields, the optional fields the caller
 * set, and the names of the optional fields it left unset.
 */
export class Dto {
  readonly required: Record<string, unknown>;
  readonly optional: Record<string, unknown>;
  readonly unset: readonly string[];
  constructor(
    required: Record<string, unknown>,
    optional: Record<string, unknown>,
    unset: readonly string[],
  ) {
    this.required = required;
    this.optional = optional;
    this.unset = unset;
  }
}

export const dto = (
  required: Record<string, unknown>,
  optional: Record<string, unknown> = {},
  unset: readonly string[] = [],
): Dto => new Dto(required, optional, unset);

export interface JsonClient {
  name: string;
  contentType: string;
  /** The body text this client sends for `value`. */
  render(value: unknown): string;
}

/** Go's omitempty leaves out false, 0, "" and empty slices, not only unset fields. */
const isZero = (v: unknown): boolean =>
  v === false || v === 0 || v === "" || (Array.isArray(v) && v.length === 0);

/** The value as it stands after a serialiser's treatment of unset and zero fields. */
function shape(value: unknown, mode: "nulls" | "omitempty"): unknown {
  if (Array.isArray(value)) return value.map((v) => shape(v, mode));
  if (!(value instanceof Dto)) return value;
  const out: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(value.required)) out[k] = shape(v, mode);
  for (const [k, v] of Object.entries(value.optional))
    if (mode === "nulls" || !isZero(v)) out[k] = shape(v, mode);
  if (mode === "nulls") for (const k of value.unset) out[k] = null;
  return out;
}

/** Every character outside printable ASCII, and the HTML-sensitive ones, as \uXXXX. */
function escapeText(json: string, htmlToo: boolean): string {
  const re = htmlToo ? /[^\x20-\x7e]|[<>&'+]/g : /[^\x20-\x7e]/g;
  return json.replace(re, (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, "0")}`);
}

/** Python's json.dumps: ", " and ": " separators, ensure_ascii. */
function pythonDumps(value: unknown): string {
  if (value === null) return "null";
  if (Array.isArray(value)) return `[${value.map(pythonDumps).join(", ")}]`;
  if (typeof value === "object") {
    const entries = Object.entries(value as Record<string, unknown>);
    return `{${entries.map(([k, v]) => `${escapeText(JSON.stringify(k), false)}: ${pythonDumps(v)}`).join(", ")}}`;
  }
  return escapeText(JSON.stringify(value), false);
}

export const JSON_CLIENTS: readonly JsonClient[] = [
  {
    // A default ObjectMapper writes every field, unset ones as null.
    name: "jackson",
    // Spring's MediaType.APPLICATION_JSON_UTF8 (Spring before 5.2) names the charset unspaced.
    contentType: "application/json;charset=UTF-8",
    render: (v) => JSON.stringify(shape(v, "nulls")),
  },
  {
    // camelCase naming, default settings: nulls written, non-ASCII and <>&'+ escaped.
    name: "system-text-json",
    contentType: "application/json; charset=utf-8",
    render: (v) => escapeText(JSON.stringify(shape(v, "nulls")), true),
  },
  {
    // encoding/json with omitempty on optional fields: unset and zero values left out.
    name: "go-omitempty",
    contentType: "application/json",
    // json.Marshal escapes <, >, & and U+2028/U+2029 for embedding in HTML.
    render: (v) =>
      JSON.stringify(shape(v, "omitempty")).replace(
        /[<>&\u2028\u2029]/g,
        (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, "0")}`,
      ),
  },
  {
    // requests' json= of dataclasses.asdict: None becomes null, json.dumps spacing and escapes.
    name: "python-requests",
    contentType: "application/json",
    render: (v) => pythonDumps(shape(v, "nulls")),
  },
];

export type Param = string | number | boolean | undefined;

export interface QueryClient {
  name: string;
  /** The query string (without "?") this client sends for these parameters. */
  render(params: Record<string, Param>): string;
}

const enc = encodeURIComponent;
const pairs = (
  params: Record<string, Param>,
  one: (k: string, v: Param) => string | undefined,
): string =>
  Object.entries(params)
    .map(([k, v]) => one(k, v))
    .filter((p) => p !== undefined)
    .join("&");

export const QUERY_CLIENTS: readonly QueryClient[] = [
  {
    // params= drops None and writes booleans with str(): "True", "False".
    name: "python-requests",
    render: (p) =>
      pairs(p, (k, v) =>
        v === undefined
          ? undefined
          : `${enc(k)}=${enc(typeof v === "boolean" ? (v ? "True" : "False") : String(v))}`,
      ),
  },
  {
    // A GET form sends every input, an empty one as "name=".
    name: "browser-form",
    render: (p) => pairs(p, (k, v) => `${enc(k)}=${v === undefined ? "" : enc(String(v))}`),
  },
  {
    // url.Values with only the set parameters; strconv.FormatBool.
    name: "go-url-values",
    render: (p) =>
      pairs(p, (k, v) => (v === undefined ? undefined : `${enc(k)}=${enc(String(v))}`)),
  },
  {
    // Spring's UriComponentsBuilder.queryParam(name, null) writes the bare name.
    name: "java-uri-builder",
    render: (p) => pairs(p, (k, v) => (v === undefined ? enc(k) : `${enc(k)}=${enc(String(v))}`)),
  },
  {
    // .NET: bool.ToString() is "True"/"False"; null parameters left out.
    name: "dotnet",
    render: (p) =>
      pairs(p, (k, v) =>
        v === undefined
          ? undefined
          : `${enc(k)}=${enc(typeof v === "boolean" ? (v ? "True" : "False") : String(v))}`,
      ),
  },
];

export interface FormClient {
  name: string;
  /** The text fields this client sends for these values (files are added by the caller). */
  fields(values: Record<string, Param>): [string, string][];
}

export const FORM_CLIENTS: readonly FormClient[] = [
  {
    // files= and data=: None left out, booleans written with str().
    name: "python-requests",
    fields: (vals) =>
      Object.entries(vals).flatMap(([k, v]): [string, string][] =>
        v === undefined ? [] : [[k, typeof v === "boolean" ? (v ? "True" : "False") : String(v)]],
      ),
  },
  {
    // A browser form sends every text input, an empty one as "".
    name: "browser-form",
    fields: (vals) => Object.entries(vals).map(([k, v]) => [k, v === undefined ? "" : String(v)]),
  },
  {
    // curl -F for the set fields, booleans as 1/0.
    name: "curl",
    fields: (vals) =>
      Object.entries(vals).flatMap(([k, v]): [string, string][] =>
        v === undefined ? [] : [[k, typeof v === "boolean" ? (v ? "1" : "0") : String(v)]],
      ),
  },
];

/** Sends `value` as `client` writes it, with the scope headers every test passes. */
export function sendJson(
  server: TestServer,
  client: JsonClient,
  method: string,
  urlPath: string,
  value: unknown,
  headers: Record<string, string> = scopeHeaders(),
): Promise<Reply> {
  return server.call(method, urlPath, {
    headers: { ...headers, "content-type": client.contentType },
    raw: client.render(value),
  });
}
