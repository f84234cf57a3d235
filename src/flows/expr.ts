/**
 * JSONata compilation and evaluation, shared by operators, edge conditions and http templates.
 * Compiled expressions are cached by their text: a flow revision's expressions are parsed once and
 * reused by every run, which keeps small-flow run latency to evaluation cost only.
 *
 * Flow expressions are tenants' code: they are evaluated in the expression processes
 * (expr-pool.ts, docs/security.md "Flow expressions"), with JSONata's own guardrails as the first
 * line. This module holds what both sides share; the service itself only parses (validation).
 */
import jsonata from "jsonata";
import { LRUCache } from "lru-cache";
import { compileFast, FALLBACK, type Fast } from "./expr-fast.ts";

type Compiled = ReturnType<typeof jsonata>;

const MAX_CACHED = 10_000;
// Bounded so that ad-hoc deploys cannot grow memory without end; the least used go first.
const cache = new LRUCache<string, Compiled>({ max: MAX_CACHED });

/** Compile (or fetch from cache), without evaluating. Throws JSONata's error for invalid text. */
export function compileExpr(text: string): Compiled {
  let compiled = cache.get(text);
  if (compiled === undefined) {
    compiled = jsonata(text);
    cache.set(text, compiled);
  }
  return compiled;
}

/** A message describing why `text` is not valid JSONata, or null when it compiles. */
export function expressionError(text: string): string | null {
  try {
    compileExpr(text);
    return null;
  } catch (err) {
    const e = err as { message?: string; position?: number };
    const at = typeof e.position === "number" ? ` (at position ${e.position})` : "";
    return `${e.message ?? String(err)}${at}`;
  }
}

const LOCATED = Symbol("located");

/**
 * `err` as an Error whose message starts with where in the flow it happened (`operator m1 (map),
 * fields.up`, `edge a->b, when`, `body.v`) and ends with JSONata's position in the expression,
 * so that a run's error names the place without the server's logs (docs/flow-graph.md, "Where a
 * run failed"). JSONata's `code` is kept (the lanes tell its own stops by it); an error located
 * once passes through unchanged.
 */
export function located(err: unknown, where: string): Error {
  const e = (typeof err === "object" && err !== null ? err : {}) as {
    message?: unknown;
    position?: unknown;
    code?: unknown;
    [LOCATED]?: true;
  };
  if (e[LOCATED]) return err as Error;
  const text = typeof e.message === "string" ? e.message : String(err);
  const at = typeof e.position === "number" ? ` (at position ${e.position})` : "";
  return Object.assign(new Error(`${where}: ${text}${at}`), {
    ...(e.code !== undefined && { code: e.code }),
    [LOCATED]: true as const,
  });
}

/** JSONata's own bounds on one evaluation (docs/flow-graph.md, "Expression limits"). */
export interface Guardrails {
  /** Wall time of one evaluation, checked at every step. */
  timeoutMs: number;
  /** Nesting of evaluation steps (runaway recursion). */
  depth: number;
}

/** Evaluates expressions and templates, each compiled once with the guardrails. */
export interface Evaluator {
  /** `input` as context, `$params` bound to the run parameter. */
  evaluate(text: string, input: unknown, params: unknown): Promise<unknown>;
  /** One template string (below). */
  template(text: string, input: unknown, params: unknown): Promise<unknown>;
  /**
   * Every string inside a JSON-like value rendered as a template (http bodies); with `at`, a
   * failing one is named by its path under `at` (`body.v.0`).
   */
  deep(value: unknown, input: unknown, params: unknown, at?: string): Promise<unknown>;
}

export function createEvaluator(g: Guardrails): Evaluator {
  const guarded = new LRUCache<string, { compiled: Compiled; fast: Fast | null }>({
    max: MAX_CACHED,
  });
  const options = { timeout: g.timeoutMs, stack: g.depth };
  return evaluatorOver((text, input, params) => {
    let entry = guarded.get(text);
    if (entry === undefined) {
      const compiled = jsonata(text, options);
      entry = { compiled, fast: compileFast(compiled.ast(), g.depth) };
      guarded.set(text, entry);
    }
    // The simplest expressions as plain functions, where they know JSONata's answer (expr-fast.ts).
    if (entry.fast) {
      const value = entry.fast(input, params);
      if (value !== FALLBACK) return Promise.resolve(value);
    }
    return entry.compiled.evaluate(input, { params });
  });
}

/** Templates over any way of evaluating one expression (expr-lanes.ts adds a job's deadline). */
export function evaluatorOver(evaluate: Evaluator["evaluate"]): Evaluator {
  const template = (text: string, input: unknown, params: unknown) =>
    renderTemplate(evaluate, text, input, params);
  // `at`: the dotted path of `value` in the node's config, which a failing template is named by.
  const deep = async (
    value: unknown,
    input: unknown,
    params: unknown,
    at?: string,
  ): Promise<unknown> => {
    const under = (k: string | number) => (at === undefined ? undefined : `${at}.${k}`);
    if (typeof value === "string") {
      if (at === undefined) return template(value, input, params);
      try {
        return await template(value, input, params);
      } catch (err) {
        throw located(err, at);
      }
    }
    if (Array.isArray(value))
      return Promise.all(value.map((v, i) => deep(v, input, params, under(i))));
    if (typeof value === "object" && value !== null) {
      const out: Record<string, unknown> = {};
      for (const [k, v] of Object.entries(value)) out[k] = await deep(v, input, params, under(k));
      return out;
    }
    return value;
  };
  return { evaluate, template, deep };
}

/** JSONata's $boolean casting: empty strings, 0, empty arrays/objects and undefined are false. */
export function truthy(value: unknown): boolean {
  if (Array.isArray(value)) return value.some(truthy);
  if (typeof value === "object" && value !== null) return Object.keys(value).length > 0;
  return Boolean(value);
}

export type TemplatePart = string | { expr: string };

const templateCache = new LRUCache<string, TemplatePart[]>({ max: MAX_CACHED });

/**
 * Split a string holding `{{expr}}` templates into literal and expression parts. Throws on an
 * unclosed `{{`, so that the validator can report it like any other invalid expression.
 */
export function parseTemplate(text: string): TemplatePart[] {
  const cached = templateCache.get(text);
  if (cached) return cached;
  const parts: TemplatePart[] = [];
  let rest = text;
  for (;;) {
    const open = rest.indexOf("{{");
    if (open < 0) break;
    const close = rest.indexOf("}}", open + 2);
    if (close < 0) throw new Error(`unclosed "{{" in template: ${text}`);
    if (open > 0) parts.push(rest.slice(0, open));
    parts.push({ expr: rest.slice(open + 2, close) });
    rest = rest.slice(close + 2);
  }
  if (rest !== "") parts.push(rest);
  templateCache.set(text, parts);
  return parts;
}

/** The expressions of a template string (for validation). */
export function templateExpressions(text: string): string[] {
  return parseTemplate(text).flatMap((p) => (typeof p === "string" ? [] : [p.expr]));
}

function stringify(value: unknown): string {
  if (value === undefined || value === null) return "";
  return typeof value === "string" ? value : JSON.stringify(value);
}

/**
 * Render a template. A string that is exactly one `{{expr}}` yields the raw value (so a JSON body
 * field can carry a number or an object); otherwise parts are concatenated as text.
 */
async function renderTemplate(
  evaluate: Evaluator["evaluate"],
  text: string,
  input: unknown,
  params: unknown,
): Promise<unknown> {
  const parts = parseTemplate(text);
  const only = parts.length === 1 ? parts[0] : undefined;
  if (only !== undefined && typeof only !== "string") return evaluate(only.expr, input, params);
  let out = "";
  for (const part of parts) {
    out += typeof part === "string" ? part : stringify(await evaluate(part.expr, input, params));
  }
  return out;
}
