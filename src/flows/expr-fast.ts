/**
 * The simplest JSONata expressions as plain functions (docs/flow-graph.md, "Expression
 * limits"): a field path, a literal, and arithmetic, comparisons, `and` and `or` over them, which
 * most filters and mappings are. JSONata evaluates every step through promises, 5–8 µs an
 * evaluation here, and a filter or a mapping evaluates once per record; these take a fraction of
 * a microsecond. A compiled function answers only for values whose answer it knows to be
 * JSONata's: numbers for arithmetic (a finite result), two numbers or two strings for an order,
 * two primitives for `=` and `!=`, booleans for `and` and `or`, an own field of an object on each
 * step of a path. For anything else (a missing field, an array, a type JSONata would refuse) it
 * answers FALLBACK and JSONata evaluates, with its own errors. test/flows/expr-fast.test.ts checks
 * every answer against JSONata's on generated expressions and data.
 */

/** The compiled function does not know JSONata's answer for this input. */
export const FALLBACK: unique symbol = Symbol("fallback");
export type Fast = (input: unknown, params: unknown) => unknown;

interface Node {
  type: string;
  value?: unknown;
  steps?: Node[];
  lhs?: Node;
  rhs?: Node;
  expression?: Node;
  expressions?: Node[];
}

type Primitive = number | string | boolean | null;
const isPrimitive = (v: unknown): v is Primitive =>
  v === null || typeof v === "string" || typeof v === "boolean" || Number.isFinite(v);

/** A node with these keys at most: nothing else the parser may attach (stages, focus, groups…). */
const only = (node: object, keys: readonly string[]) =>
  Object.keys(node).every((k) => keys.includes(k));
const STEP_KEYS = ["type", "value", "position"];
const plainStep = (s: Node) =>
  s.type === "name" && typeof s.value === "string" && only(s, STEP_KEYS);

function path(node: Node): Fast | null {
  const steps = node.steps ?? [];
  if (!only(node, ["type", "steps", "position"]) || steps.length === 0) return null;
  const [first, ...rest] = steps as [Node, ...Node[]];
  const fromParams =
    first.type === "variable" && first.value === "params" && only(first, STEP_KEYS);
  const names = (fromParams ? rest : steps).map((s) => (plainStep(s) ? (s.value as string) : null));
  if (names.some((n) => n === null) || names.length === 0) return null;
  return (input, params) => {
    let cur = fromParams ? params : input;
    for (const name of names as string[]) {
      if (typeof cur !== "object" || cur === null || Array.isArray(cur)) return FALLBACK;
      if (!Object.hasOwn(cur, name)) return FALLBACK;
      cur = (cur as Record<string, unknown>)[name];
    }
    return isPrimitive(cur) ? cur : FALLBACK;
  };
}

const ARITHMETIC: Record<string, (a: number, b: number) => number> = {
  "+": (a, b) => a + b,
  "-": (a, b) => a - b,
  "*": (a, b) => a * b,
  "/": (a, b) => a / b,
  "%": (a, b) => a % b,
};
const ORDER: Record<string, (a: number | string, b: number | string) => boolean> = {
  "<": (a, b) => a < b,
  "<=": (a, b) => a <= b,
  ">": (a, b) => a > b,
  ">=": (a, b) => a >= b,
};

function binary(op: string, l: Fast, r: Fast): Fast | null {
  const arith = ARITHMETIC[op];
  if (arith)
    return (i, p) => {
      const a = l(i, p);
      const b = r(i, p);
      if (typeof a !== "number" || typeof b !== "number") return FALLBACK;
      const v = arith(a, b);
      return Number.isFinite(v) ? v : FALLBACK;
    };
  const order = ORDER[op];
  if (order)
    return (i, p) => {
      const a = l(i, p);
      const b = r(i, p);
      const same = typeof a === typeof b && (typeof a === "number" || typeof a === "string");
      return same ? order(a as number | string, b as number | string) : FALLBACK;
    };
  if (op === "=" || op === "!=")
    return (i, p) => {
      const a = l(i, p);
      const b = r(i, p);
      if (a === FALLBACK || b === FALLBACK) return FALLBACK;
      return (a === b) === (op === "=");
    };
  if (op === "and" || op === "or")
    return (i, p) => {
      const a = l(i, p);
      if (typeof a !== "boolean") return FALLBACK;
      // JSONata does not evaluate the right side once the left decides.
      if (a === (op === "or")) return a;
      const b = r(i, p);
      return typeof b === "boolean" ? b : FALLBACK;
    };
  return null;
}

// Every key of each kind of node the compiler reads: a node with any other (a predicate, a group,
// a focus, a sort attached by the parser) is not of the simple kind.
const LITERAL_KEYS = ["type", "value", "position"];
const BLOCK_KEYS = ["type", "expressions", "position"];
const UNARY_KEYS = ["type", "value", "expression", "position"];
const BINARY_KEYS = ["type", "value", "lhs", "rhs", "position"];

/**
 * `room`: the nesting JSONata allows from this node (its `stack` guardrail counts one level per
 * node it evaluates, two for a path and its step): deeper, JSONata fails, and so must the node.
 */
function compileNode(node: Node, room: number): Fast | null {
  if (room < 1) return null;
  switch (node.type) {
    case "path":
      return room < 2 ? null : path(node);
    case "number":
    case "string":
    case "value": {
      const v = node.value;
      return isPrimitive(v) && only(node, LITERAL_KEYS) ? () => v : null;
    }
    case "block":
      return node.expressions?.length === 1 && only(node, BLOCK_KEYS)
        ? compileNode(node.expressions[0] as Node, room - 1)
        : null;
    case "unary": {
      if (node.value !== "-" || !node.expression || !only(node, UNARY_KEYS)) return null;
      const e = compileNode(node.expression, room - 1);
      if (!e) return null;
      return (i, p) => {
        const v = e(i, p);
        return typeof v === "number" ? -v : FALLBACK;
      };
    }
    case "binary": {
      if (!only(node, BINARY_KEYS)) return null;
      const l = node.lhs && compileNode(node.lhs, room - 1);
      const r = node.rhs && compileNode(node.rhs, room - 1);
      return l && r ? binary(String(node.value), l, r) : null;
    }
    default:
      return null;
  }
}

/**
 * A function for an expression of the simple kind, from its JSONata syntax tree; else null.
 * `depth`: JSONata's nesting guardrail the expression is evaluated with (absent: none).
 */
export function compileFast(ast: unknown, depth = Number.POSITIVE_INFINITY): Fast | null {
  return typeof ast === "object" && ast !== null ? compileNode(ast as Node, depth) : null;
}
