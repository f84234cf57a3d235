/**
 * `http`: one request. `{{expr}}` templates in url, header values and body strings are evaluated
 * against the node input (with `$params`); template values are not URL-encoded (use
 * `$encodeUrlComponent`); `${secret.NAME}` in url and header values is a secret of the run's scope
 * (docs/secrets.md). An object/array body is sent as JSON. The response body is parsed as JSON
 * when it parses, else returned as text; a non-2xx status fails the node.
 */

import { Type } from "typebox";
import { BodyTooLarge, readBody } from "../../fetch-body.ts";
import { MAX_JSON_DEPTH, tooDeep } from "../../schema/json-depth.ts";
import { numberProblem } from "../../schema/json-integers.ts";
import { maskCutText, maskOrder, maskText } from "../../secrets/mask.ts";
import { substituteSecrets } from "../../secrets/substitute.ts";
import type { ConfigExpression, NodeContext, NodeDef } from "./types.ts";

const DETAIL_CHARS = 500;
const METHODS = ["GET", "POST", "PUT", "PATCH", "DELETE", "HEAD", "OPTIONS"] as const;

/** Paths of every string inside a JSON-like value, for template validation. */
function stringsIn(value: unknown, path: (string | number)[]): ConfigExpression[] {
  if (typeof value === "string") return [{ path, text: value, kind: "template" }];
  if (Array.isArray(value)) return value.flatMap((v, i) => stringsIn(v, [...path, i]));
  if (typeof value === "object" && value !== null) {
    return Object.entries(value).flatMap(([k, v]) => stringsIn(v, [...path, k]));
  }
  return [];
}

const SECRET_REF = /\$\{secret\./;

function usesSecrets(url: unknown, headers: unknown): boolean {
  const texts = [url, ...Object.values((headers ?? {}) as Record<string, unknown>)];
  return texts.some((t) => typeof t === "string" && SECRET_REF.test(t));
}

const MAX_REDIRECTS = 5;

/**
 * A request that carries secrets follows redirects only within its own origin: the fetch client
 * drops `authorization` on a redirect elsewhere but forwards every other header, and a server
 * must not be able to send a secret on to a host of its choice (docs/secrets.md).
 */
async function sendFollowing(
  fetchFn: typeof fetch,
  url: string,
  init: { method: string; headers: Record<string, string>; signal: AbortSignal },
  body: string | undefined,
  withSecrets: boolean,
): Promise<Response> {
  const send = (to: string, b: string | undefined, method: string) =>
    fetchFn(to, {
      ...init,
      method,
      ...(b !== undefined ? { body: b } : {}),
      ...(withSecrets ? { redirect: "manual" as const } : {}),
    });
  let res = await send(url, body, init.method);
  let at = url;
  let method = init.method;
  for (let hops = 0; withSecrets && res.status >= 300 && res.status < 400; hops++) {
    const location = res.headers.get("location");
    if (location === null) return res;
    const next = new URL(location, at);
    if (next.origin !== new URL(at).origin || hops >= MAX_REDIRECTS) {
      await res.body?.cancel();
      throw new Error(
        `${init.method} ${url}: redirect to ${next.origin} not followed: the request carries secrets`,
      );
    }
    await res.body?.cancel();
    // As fetch does: 303, and 301/302 after a POST, continue as a GET without the body.
    const toGet =
      res.status === 303 || ((res.status === 301 || res.status === 302) && method === "POST");
    if (toGet) {
      method = "GET";
      body = undefined;
    }
    at = next.href;
    res = await send(at, body, method);
  }
  return res;
}

/**
 * fetch reports a failed connection as `TypeError: fetch failed` with the reason as its cause
 * (refused, unresolved, a private address refused): the node's error names the reason. A name
 * with several addresses, each tried and failed, gives an AggregateError without a message of
 * its own: the reasons are its errors'.
 */
function unreachable(err: unknown, method: string, url: string): unknown {
  if (!(err instanceof TypeError) || !(err.cause instanceof Error)) return err;
  const { cause } = err;
  const reasons =
    cause.message === "" && cause instanceof AggregateError
      ? cause.errors.map((e: unknown) => (e instanceof Error ? e.message : String(e))).join("; ")
      : cause.message;
  return new Error(`${method} ${url}: ${reasons}`);
}

function parseBody(text: string): unknown {
  if (text === "") return null;
  try {
    return JSON.parse(text);
  } catch {
    return text;
  }
}

/**
 * The start of a failing answer's body. An echoing server may answer a secret value: it is masked
 * here, before the cut, so the cut never leaves the start of one for the run's masking to miss.
 */
function errorDetail(parsed: unknown, ctx: NodeContext): string {
  const text = typeof parsed === "string" ? parsed : JSON.stringify(parsed);
  if (text.length <= DETAIL_CHARS) return text;
  const values = maskOrder(ctx.deps.secrets?.handedOut() ?? []);
  return maskCutText(maskText(text, values).slice(0, DETAIL_CHARS), values);
}

export const httpNode: NodeDef = {
  type: "http",
  configSchema: Type.Object({
    method: Type.Optional(Type.Union(METHODS.map((m) => Type.Literal(m)))),
    url: Type.String({ minLength: 1 }),
    headers: Type.Optional(Type.Record(Type.String(), Type.String())),
    body: Type.Optional(Type.Unknown()),
    timeoutSeconds: Type.Optional(Type.Number({ exclusiveMinimum: 0, maximum: 2_147_483 })),
  }),
  expressions(config) {
    return [
      ...stringsIn(config.url, ["url"]),
      ...stringsIn(config.headers ?? {}, ["headers"]),
      ...stringsIn(config.body, ["body"]),
    ];
  },
  async run(ctx) {
    const { config, input, params } = ctx;
    // `${secret.NAME}` in url and header values: resolved here, at execution only (docs/secrets.md).
    // `at`: the field a failing template is named by (docs/flow-graph.md, "Where a run failed").
    const render = (text: string, at: string) =>
      substituteSecrets(text, ctx.deps.secrets, (t) =>
        ctx.deps.expressions.template(t, input, params, at),
      );
    const url = String(await render(config.url as string, "url"));
    const headers: Record<string, string> = {};
    for (const [k, v] of Object.entries((config.headers ?? {}) as Record<string, string>)) {
      const value = await render(v, `headers.${k}`);
      headers[k] = typeof value === "string" ? value : JSON.stringify(value);
    }
    let body: string | undefined;
    if (config.body !== undefined) {
      const rendered = await ctx.deps.expressions.deep(config.body, input, params, "body");
      if (typeof rendered === "string") body = rendered;
      else {
        body = JSON.stringify(rendered);
        if (!Object.keys(headers).some((h) => h.toLowerCase() === "content-type")) {
          headers["content-type"] = "application/json";
        }
      }
    }
    const signals = [ctx.signal];
    if (typeof config.timeoutSeconds === "number") {
      signals.push(AbortSignal.timeout(config.timeoutSeconds * 1000));
    }
    const method = (config.method as string | undefined) ?? "GET";
    const init = { method, headers, signal: AbortSignal.any(signals) };
    const withSecrets = usesSecrets(config.url, config.headers);
    const res = await sendFollowing(ctx.deps.fetch, url, init, body, withSecrets).catch(
      (err: unknown) => {
        throw unreachable(err, method, url);
      },
    );
    // The response is held as it is read (docs/run-limits.md, "Values in memory"), until the
    // output the executor reserves takes its place.
    const frees: (() => void)[] = [];
    const hold = ctx.deps.hold;
    try {
      const text = await readBody(res, ctx.deps.valueBytes, {
        ...(hold ? { hold: (bytes: number) => frees.push(hold(bytes)) } : {}),
      }).catch((err: unknown) => {
        throw err instanceof BodyTooLarge ? new Error(`${method} ${url}: ${err.message}`) : err;
      });
      const parsed = parseBody(text);
      // Nested deeper than any value Sluice keeps (docs/flow-graph.md, "http"): every walk after
      // the parse (the node's log, the run's record) would overflow the stack.
      if (typeof parsed !== "string" && tooDeep(text, parsed))
        throw new Error(
          `HTTP ${res.status} from ${method} ${url}: the answer nests deeper than ${MAX_JSON_DEPTH} levels`,
        );
      if (!res.ok) {
        throw new Error(`HTTP ${res.status} from ${method} ${url}: ${errorDetail(parsed, ctx)}`);
      }
      // A number JSON.parse changed (an integer rounded, one past a double made Infinity, then
      // null) fails the node rather than the flow going on with another number than the server
      // sent, as a request body or a script's return value (docs/flow-graph.md, "http").
      const changed = typeof parsed === "string" ? undefined : numberProblem(text, "response");
      if (changed !== undefined)
        throw new Error(`${method} ${url}: ${changed.replace(/; send .*/, "")}`);
      return parsed;
    } finally {
      for (const free of frees) free();
    }
  },
};
