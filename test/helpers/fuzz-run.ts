import { gzipSync } from "node:zlib";
import fc from "fast-check";
import { makeSessionCookie, signToken } from "../../src/auth/tokens.ts";
import { ErrorCode } from "../../src/errors.ts";
import { deployAndActivate, NO_SCRIPT_FLOW } from "./flows.ts";
import {
  contentTypes,
  fromSchema,
  type Json,
  type JsonSchema,
  mutate,
  type Operation,
  text,
  wireBody,
} from "./fuzz-arbs.ts";
import { type RawAnswer, rawRequest } from "./raw-http.ts";
import { SCOPE, scopeHeaders, startServer, type TestServer, upload } from "./server.ts";
import { makeZip } from "./zip.ts";

/**
 * The fuzz suite's engine (docs/errors.md, "bad input"): random and mutated requests against
 * every route of the OpenAPI document, on one server with auth off and one with signatures.
 * Properties of every answer: HTTP 200, a JSON envelope with a catalog code, never the
 * "internal error" of an unexpected exception, within a time bound; the process stays up (an
 * uncaught error fails the test run); every run or task answered as accepted is in the store.
 */

export interface FuzzResult {
  seed: number;
  cases: number;
  ms: number;
  accepted: number;
  /** How many answers carried each envelope code: shows how deep the cases reached. */
  codes: Record<string, number>;
}

const SECRETS = { app: "fuzz-app-secret", internal: "fuzz-internal", session: "fuzz-session" };
const ANSWER_BOUND_MS = 15_000;
const CATALOG = new Set<number>([0, ...Object.values(ErrorCode)]);

interface Target {
  server: TestServer;
  port: number;
  signed: boolean;
}

interface Case {
  target: number;
  head: string;
  body: Buffer;
  route: string;
  /** The JSON text as written, when the server should read exactly it (see echoed). */
  plain?: Buffer | undefined;
  contentType?: string | undefined;
}

export async function runFuzz(opts: { seed: number; runs: number }): Promise<FuzzResult> {
  const env = {
    MAX_WAIT_S: "2",
    LIMIT_BODY_BYTES: "65536",
    LIMIT_UPLOAD_FILE_BYTES: "32768",
    LIMIT_DISCARD_IDLE_MS: "2000",
  };
  const plain = await startServer(env);
  const signed = await startServer({
    ...env,
    AUTH_MODE: "signature",
    AUTH_APP_SECRETS: `${SCOPE.app}=${SECRETS.app}`,
    AUTH_INTERNAL_SECRET: SECRETS.internal,
    AUTH_SESSION_SECRET: SECRETS.session,
  });
  const targets: Target[] = [plain, signed].map((server, i) => ({
    server,
    port: Number(new URL(server.url).port),
    signed: i === 1,
  }));
  try {
    await seed(plain, scopeHeaders());
    await seed(signed, goodAuth("app"));
    const ops = operations((await plain.call("GET", "/openapi.json")).body);
    const accepted: { target: Target; id: string }[] = [];
    const started = Date.now();
    let cases = 0;
    const codes: Record<string, number> = {};
    await fc.assert(
      fc.asyncProperty(caseArb(ops), async (c) => {
        cases++;
        const target = targets[c.target] as Target;
        const answer = await rawRequest(target.port, c.head, c.body, ANSWER_BOUND_MS);
        const id = checkAnswer(c, answer);
        const code = /"code":(\d+)/.exec(answer.body.toString("latin1"))?.[1] ?? "other";
        codes[code] = (codes[code] ?? 0) + 1;
        if (process.env.FUZZ_DEBUG && (code === "400" || code === "401"))
          console.error(c.route, answer.body.toString().slice(30, 140));
        if (id) accepted.push({ target, id });
      }),
      { seed: opts.seed, numRuns: opts.runs },
    );
    await fc.assert(
      fc.asyncProperty(fc.nat(1), garbageArb(), async (t, bytes) => {
        cases++;
        const answer = await rawRequest((targets[t] as Target).port, "", bytes, 1000);
        // A mangled head may still be waiting for its end: no answer is owed, but one that is
        // given is an envelope, and the server lives on (checked below).
        if (!answer.closedEarly && answer.status !== 200)
          throw new Error(
            `garbage got HTTP ${answer.status}: ${answer.body.toString().slice(0, 200)}`,
          );
      }),
      { seed: opts.seed, numRuns: Math.ceil(opts.runs / 20) },
    );
    for (const { target, id } of accepted) {
      if (!(await target.server.services.store.getRun(null, id)))
        throw new Error(`run ${id} was answered as accepted but is not in the store`);
    }
    for (const t of targets) {
      const health = await t.server.call("GET", "/health");
      if (health.status !== 200) throw new Error(`health after fuzzing: ${health.text}`);
    }
    return { seed: opts.seed, cases, ms: Date.now() - started, accepted: accepted.length, codes };
  } finally {
    await plain.close();
    await signed.close();
  }
}

async function seed(server: TestServer, headers: Record<string, string>): Promise<void> {
  await deployAndActivate(server, "fz-flow", NO_SCRIPT_FLOW, {}, headers);
  const r = await upload(
    server,
    [{ name: "fz-echo.py", content: "def main(p=None):\n    return p\n" }],
    { path: "/fz" },
    headers.token ? { ...headers, token: signToken(SECRETS.internal, SCOPE, nowS()) } : headers,
  );
  if (!r.body.status) throw new Error(`seeding the fuzz server failed: ${r.text}`);
}

const nowS = () => Math.floor(Date.now() / 1000);

function goodAuth(kind: "app" | "internal"): Record<string, string> {
  const secret = kind === "app" ? SECRETS.app : SECRETS.internal;
  return { ...scopeHeaders(), token: signToken(secret, SCOPE, nowS()) };
}

/** Routes of the two services (not the root endpoints) from the OpenAPI document. */
export function operations(doc: {
  paths: Record<string, Record<string, Record<string, unknown>>>;
}): Operation[] {
  const ops: Operation[] = [];
  for (const [path, methods] of Object.entries(doc.paths)) {
    if (!path.startsWith("/dataflow-3-0/") && !path.startsWith("/script/")) continue;
    for (const [method, op] of Object.entries(methods)) {
      const content = (op.requestBody as { content?: Record<string, { schema: JsonSchema }> })
        ?.content;
      ops.push({
        method: method.toUpperCase(),
        path,
        params: (op.parameters as Operation["params"] | undefined) ?? [],
        body: content?.["application/json"]?.schema,
        multipart: Boolean(content?.["multipart/form-data"]),
      });
    }
  }
  return ops;
}

const POOL = ["fz-flow", "fz-echo", "/fz", "/flows", "/", "fz-missing"];

/** Real bodies per route, to be mutated: they reach past validation. */
const SEEDS: Record<string, Json[]> = {
  "/dataflow-3-0/run": [{ elementName: "fz-flow", parameter: { orders: [{ amount: 1, qty: 2 }] } }],
  "/dataflow-3-0/run-sync": [
    { elementName: "fz-flow", path: "/flows", parameter: { orders: [] }, timeout: 1 },
  ],
  "/dataflow-3-0/flow/deploy": [
    {
      elementName: "fz-new",
      revisionName: "r1",
      path: "/flows",
      flow: NO_SCRIPT_FLOW as unknown as Json,
      configure: { runTimeout: 5, logContent: true },
    },
  ],
  "/dataflow-3-0/monitor/runs": [
    { pageNo: 0, pageSize: 5, elementName: "fz-flow", colFilters: [{ name: "duration", from: 0 }] },
  ],
  "/script/script/run-sync": [{ elementName: "fz-echo", parameter: { a: 1 }, timeout: 1 }],
  "/script/script/run": [{ elementName: "fz-echo", path: "/fz", parameter: [1, 2] }],
};

function caseArb(ops: Operation[]): fc.Arbitrary<Case> {
  return fc.oneof({ weight: 9, arbitrary: routeCaseArb(ops) }, { weight: 1, arbitrary: echoArb() });
}

const ECHO: Operation = {
  method: "POST",
  path: "/script/external/fz-echo/run-sync",
  params: [],
  multipart: false,
};

/**
 * Every body form (content types, charsets, encodings, bytes that are not UTF-8, numbers past a
 * double) straight at the seeded script that returns its parameter, with a good scope and no
 * query: its answers are checked against what was sent (echoed). Through the routes' own cases
 * too few of them get past the lookup to be compared.
 */
function echoArb(): fc.Arbitrary<Case> {
  return fc.tuple(jsonPayloadArb(ECHO), fc.boolean()).map(([payload, chunked]) => {
    const headers: Record<string, string> = {
      host: "127.0.0.1",
      ...scopeHeaders(),
      ...payload.headers,
    };
    if (chunked) headers["transfer-encoding"] = "chunked";
    else headers["content-length"] = String(payload.bytes.length);
    const lines = Object.entries(headers).map(([k, v]) => `${k}: ${headerSafe(v)}\r\n`);
    return {
      target: 0,
      route: `POST ${ECHO.path}`,
      head: `POST ${ECHO.path} HTTP/1.1\r\n${lines.join("")}\r\n`,
      body: chunked ? chunk(payload.bytes) : payload.bytes,
      plain: payload.plain,
      contentType: payload.headers["content-type"],
    };
  });
}

function routeCaseArb(ops: Operation[]): fc.Arbitrary<Case> {
  return fc.tuple(fc.nat(1), fc.constantFrom(...ops)).chain(([target, op]) =>
    fc
      .record({
        url: urlArb(op),
        auth: authArb(target === 1),
        payload: op.multipart ? multipartArb() : jsonPayloadArb(op),
        chunked: fc.boolean(),
      })
      .map(({ url, auth, payload, chunked }) => {
        const headers: Record<string, string> = { host: "127.0.0.1", ...auth, ...payload.headers };
        if (chunked) headers["transfer-encoding"] = "chunked";
        else headers["content-length"] = String(payload.bytes.length);
        const lines = Object.entries(headers).map(([k, v]) => `${k}: ${headerSafe(v)}\r\n`);
        const body = chunked ? chunk(payload.bytes) : payload.bytes;
        return {
          target,
          route: `${op.method} ${op.path}`,
          head: `${op.method} ${url} HTTP/1.1\r\n${lines.join("")}\r\n`,
          body,
          plain: payload.plain,
          contentType: payload.headers["content-type"],
        };
      }),
  );
}

/** Header values may hold any text but line breaks, which would change the framing under test. */
const headerSafe = (v: string) => v.replace(/[\r\n]/g, " ");

function chunk(bytes: Buffer): Buffer {
  if (bytes.length === 0) return Buffer.from("0\r\n\r\n");
  return Buffer.concat([
    Buffer.from(`${bytes.length.toString(16)}\r\n`),
    bytes,
    Buffer.from("\r\n0\r\n\r\n"),
  ]);
}

/** Lone surrogates cannot be percent-encoded; they go as U+FFFD, as a browser would send them. */
const enc = (v: string) => encodeURIComponent(v.toWellFormed());

function urlArb(op: Operation): fc.Arbitrary<string> {
  const pathParams = op.params.filter((p) => p.in === "path");
  const query = op.params.filter((p) => p.in === "query");
  const pathArb = fc
    .tuple(...pathParams.map(() => fc.oneof(fc.constantFrom(...POOL), text)))
    .map((vals) => {
      let p = op.path;
      pathParams.forEach((param, i) => {
        p = p.replace(`{${param.name}}`, enc(vals[i] ?? "") || "%20");
      });
      return p;
    });
  const queryArb = fc
    .tuple(
      fc.tuple(
        ...query.map((q) =>
          fc.option(
            fc.oneof(
              fromSchema(q.schema ?? {}, POOL).map((v) =>
                typeof v === "string" ? v : JSON.stringify(v),
              ),
              fc.constantFrom("", "null", "TRUE", "0", "1", "yes"),
            ),
          ),
        ),
      ),
      fc.option(fc.tuple(text, text)),
      fc.constantFrom("ok", "ok", "ok", "raw%", "raw%zz"),
    )
    .map(([vals, extra, style]) => {
      const parts = query.flatMap((q, i) => {
        const v = vals[i];
        return v == null ? [] : [`${q.name}=${enc(v)}`];
      });
      if (extra) parts.push(`${enc(extra[0])}=${enc(extra[1])}`);
      if (style !== "ok") parts.push(style === "raw%" ? "x=%" : "y=%zz");
      return parts.join("&");
    });
  return fc.tuple(pathArb, queryArb).map(([p, q]) => (q ? `${p}?${q}` : p));
}

function authArb(signed: boolean): fc.Arbitrary<Record<string, string>> {
  const scope = fc.oneof(
    { weight: 4, arbitrary: fc.constant<Record<string, string>>(scopeHeaders()) },
    {
      weight: 1,
      arbitrary: fc.record({ app: text, space: text, user: text }, { requiredKeys: [] }),
    },
  );
  const cookieOf = (exp: number) => `session=${makeSessionCookie(SECRETS.session, SCOPE, exp)}`;
  type Add = (h: Record<string, string>) => Record<string, string>;
  const valid = fc.constantFrom<Add>(
    (h) => ({ ...h, token: signToken(SECRETS.app, SCOPE, nowS()) }),
    (h) => ({ ...h, token: signToken(SECRETS.internal, SCOPE, nowS()) }),
    (h) => ({ ...h, cookie: cookieOf(nowS() + 600) }),
  );
  const invalid = fc.constantFrom<Add>(
    (h) => h,
    (h) => ({ ...h, token: signToken(SECRETS.app, SCOPE, nowS() - 100_000) }),
    (h) => ({ ...h, token: "123.deadbeef" }),
    (h) => ({ ...h, token: "" }),
    (h) => ({ ...h, cookie: cookieOf(nowS() - 10) }),
    (h) => ({ ...h, cookie: "session=%%%; other=1" }),
  );
  const credentials = fc.oneof({ weight: 3, arbitrary: valid }, { weight: 1, arbitrary: invalid });
  return fc
    .tuple(scope, credentials, fc.boolean())
    .map(([h, add, useAuth]) => (signed || useAuth ? add(h) : h));
}

interface Payload {
  headers: Record<string, string>;
  bytes: Buffer;
  plain?: Buffer | undefined;
}

function jsonPayloadArb(op: Operation): fc.Arbitrary<Payload> {
  const seeds = SEEDS[op.path] ?? [];
  const valueArbs: fc.Arbitrary<Json>[] = [fc.jsonValue({ maxDepth: 2 }) as fc.Arbitrary<Json>];
  if (op.body) {
    const gen = fromSchema(op.body, POOL);
    valueArbs.push(gen, gen.chain(mutate));
  }
  for (const s of seeds)
    valueArbs.push(fc.constant(s), mutate(s), mutate(s), mutate(s).chain(mutate));
  const wellFormed = fc
    .tuple(fc.oneof(...valueArbs), fc.constantFrom(undefined, undefined, undefined, "gzip"))
    .map(([v, encoding]) => {
      const json = Buffer.from(JSON.stringify(v));
      const headers: Record<string, string> = { "content-type": "application/json" };
      if (encoding) headers["content-encoding"] = encoding;
      return { headers, bytes: encoding ? gzipSync(json) : json, plain: json };
    });
  const json = fc.oneof(
    {
      weight: 6,
      arbitrary: fc.oneof(...valueArbs).map((v) => (v === undefined ? "" : JSON.stringify(v))),
    },
    {
      weight: 1,
      arbitrary: fc.oneof(
        fc.constantFrom("", "{", "[]", "nul", '{"a":1}{', "[1e400]", '{"n":-1e999}'),
        fc.string(),
      ),
    },
  );
  const wild = fc
    .tuple(json.chain(wireBody), contentTypes, fc.boolean())
    .map(([wire, type, withBody]) => {
      const headers: Record<string, string> = {};
      if (type) headers["content-type"] = type;
      if (wire.encoding) headers["content-encoding"] = wire.encoding;
      const sent = withBody || op.method === "POST";
      return {
        headers,
        bytes: sent ? wire.bytes : Buffer.alloc(0),
        plain: sent ? wire.plain : undefined,
      };
    });
  if (op.method !== "POST")
    return fc.oneof(
      { weight: 3, arbitrary: fc.constant({ headers: {}, bytes: Buffer.alloc(0) }) },
      { weight: 1, arbitrary: wild },
    );
  return fc.oneof({ weight: 3, arbitrary: wellFormed }, { weight: 2, arbitrary: wild });
}

const ZIP = makeZip([
  { name: "pkg/__init__.py", content: "" },
  { name: "pkg/main.py", content: "def main(p=None):\n    return p\n" },
]);

function multipartArb(): fc.Arbitrary<Payload> {
  const file = fc.record({
    field: fc.constantFrom("batchFile", "batchFile", "batchFile", "other"),
    filename: fc.oneof(fc.constantFrom("a.py", "b.zip", "../x.py", "c.txt", "", "d.PY"), text),
    content: fc.oneof(
      fc.constantFrom<Buffer>(
        Buffer.from("def main(p):\n    return p\n"),
        Buffer.from("def main(:\n"),
        Buffer.from([0xff, 0xfe, 0, 1]),
        ZIP,
        ZIP.subarray(0, 50),
        Buffer.alloc(40_000, 0x61),
      ),
      fc.uint8Array({ maxLength: 200 }).map((a) => Buffer.from(a)),
    ),
  });
  const field = fc.tuple(
    fc.constantFrom("overwrite", "path", "folderId", "junk"),
    fc.oneof(fc.constantFrom("true", "1", "", "/fz", "no"), text),
  );
  return fc
    .record({
      files: fc.array(file, { maxLength: 3 }),
      fields: fc.array(field, { maxLength: 3 }),
      boundary: fc.constantFrom("fzb0undary", "x"),
      damage: fc.constantFrom("none", "none", "no-end", "wrong-boundary", "truncate"),
      at: fc.nat(),
    })
    .map(({ files, fields, boundary, damage, at }) => {
      const parts: Buffer[] = [];
      for (const [name, value] of fields)
        parts.push(
          Buffer.from(
            `--${boundary}\r\ncontent-disposition: form-data; name="${headerSafe(name)}"\r\n\r\n${value}\r\n`,
          ),
        );
      for (const f of files) {
        parts.push(
          Buffer.from(
            `--${boundary}\r\ncontent-disposition: form-data; name="${f.field}"; filename="${headerSafe(f.filename).replace(/"/g, "'")}"\r\ncontent-type: application/octet-stream\r\n\r\n`,
          ),
          f.content,
          Buffer.from("\r\n"),
        );
      }
      if (damage !== "no-end") parts.push(Buffer.from(`--${boundary}--\r\n`));
      let bytes = Buffer.concat(parts);
      if (damage === "truncate") bytes = bytes.subarray(0, at % (bytes.length + 1));
      const declared = damage === "wrong-boundary" ? "other" : boundary;
      return { headers: { "content-type": `multipart/form-data; boundary=${declared}` }, bytes };
    });
}

/** A well-formed bodiless request with a few bytes changed, dropped or repeated. */
function garbageArb(): fc.Arbitrary<Buffer> {
  const head = Buffer.from(
    "GET /dataflow-3-0/monitor/flows?x=1 HTTP/1.1\r\nhost: 127.0.0.1\r\napp: app1\r\nspace: space1\r\nuser: u\r\n\r\n",
  );
  const edit = fc.tuple(fc.nat(head.length - 1), fc.integer({ min: 0, max: 255 }), fc.nat(2));
  return fc.array(edit, { minLength: 1, maxLength: 4 }).map((edits) => {
    let bytes = Buffer.from(head);
    for (const [at, byte, kind] of edits) {
      const i = at % bytes.length;
      if (kind === 0) bytes[i] = byte;
      else if (kind === 1) bytes = Buffer.concat([bytes.subarray(0, i), bytes.subarray(i + 1)]);
      else bytes = Buffer.concat([bytes.subarray(0, i), Buffer.from([byte]), bytes.subarray(i)]);
    }
    return bytes;
  });
}

/**
 * The seeded script returns its parameter: an external run-sync of it that succeeded must answer
 * exactly the JSON that was sent, read as its content-type says (docs/errors.md, "How fields are
 * read"). Bytes that are not of its charset, a body that is not JSON (text/plain was once read as
 * a string) or a number JSON.parse cannot keep (1e400 ran as null) fail the property.
 */
function echoed(c: Case, answer: unknown): void {
  const compressed = /[?&]compressedFlag=(true|1)(&|\s)/i.test(c.head);
  if (!c.plain || compressed || !/^POST \/script\/external\/fz-echo\/run-sync[?\s]/.test(c.head))
    return;
  const what = `${c.route} with ${JSON.stringify(c.contentType)} ${JSON.stringify(c.plain.toString("latin1").slice(0, 100))}`;
  const label = /;\s*charset\s*=\s*"?([^";\s]*)/i.exec(c.contentType ?? "")?.[1] ?? "utf-8";
  let sent: unknown;
  try {
    const text = new TextDecoder(label, { fatal: true }).decode(c.plain);
    sent = text.trim() === "" || text.trim() === "null" ? {} : JSON.parse(text);
  } catch (err) {
    throw new Error(`${what}: accepted, but it is not JSON of its charset (${err})`);
  }
  if (JSON.stringify(sent) !== JSON.stringify(answer) || hasNonFinite(sent))
    throw new Error(`${what}: the script got ${JSON.stringify(answer)}`);
}

function hasNonFinite(v: unknown): boolean {
  if (typeof v === "number") return !Number.isFinite(v);
  if (v === null || typeof v !== "object") return false;
  return Object.values(v).some(hasNonFinite);
}

/** The properties of one answer; returns the ID of a run or task it accepted. */
function checkAnswer(c: Case, a: RawAnswer): string | undefined {
  const what = c.route;
  if (a.timedOut) throw new Error(`${what}: no answer within ${ANSWER_BOUND_MS} ms`);
  if (a.closedEarly) throw new Error(`${what}: connection closed without an answer`);
  if (a.status !== 200)
    throw new Error(`${what}: HTTP ${a.status} ${a.body.toString().slice(0, 200)}`);
  const taskStatus = a.headers["x-task-status"];
  let body: { status?: unknown; code?: unknown; message?: unknown; data?: unknown };
  try {
    body = JSON.parse(a.body.toString("utf8"));
  } catch {
    if (taskStatus === "SUCCESS" && c.route.includes("/external/")) return a.headers["x-task-id"];
    throw new Error(`${what}: answer is not JSON: ${a.body.toString().slice(0, 200)}`);
  }
  const envelope =
    body !== null &&
    typeof body === "object" &&
    typeof body.status === "boolean" &&
    typeof body.code === "number" &&
    typeof body.message === "string" &&
    "data" in body;
  if (!envelope) {
    if (taskStatus === "SUCCESS" && c.route.includes("/external/")) {
      echoed(c, body);
      return a.headers["x-task-id"];
    }
    throw new Error(`${what}: not an envelope: ${a.body.toString().slice(0, 200)}`);
  }
  if (!CATALOG.has(body.code as number))
    throw new Error(`${what}: code ${body.code} not in the catalog`);
  if (body.code === ErrorCode.BUSINESS && body.message === "internal error")
    throw new Error(`${what}: unexpected error inside the service`);
  if (body.status === true) return a.headers["x-run-id"] ?? a.headers["x-task-id"];
  return undefined;
}
