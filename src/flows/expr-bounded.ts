/**
 * Which expressions the service may evaluate itself (docs/security.md, "Flow expressions"):
 * those whose every native step costs at most about the size of the node's input. JSONata checks
 * its time limit before every evaluation step, so a chain of steps stops at the limit; what it
 * cannot stop is one step that runs long or allocates much by itself. Such a step needs one of:
 * a regular expression, a range, a sort, a padded or concatenated string that doubles step after
 * step, a constructed object or array (one step can refer to another's result twice, and the
 * structure doubles without cost until something walks it), a path step that yields the same
 * part of the input for every item (a sequence that refers to one large value many times, which
 * the next comparison walks in full), or code the expression defines (functions, bindings,
 * `$eval`). An expression with any of these goes to the expression processes. The rule is an
 * allowlist: anything not named here is not bounded.
 */
import jsonata from "jsonata";
import { LRUCache } from "lru-cache";

type Node = Record<string, unknown>;

const NODE_TYPES = new Set([
  "path",
  "name",
  "string",
  "number",
  "value",
  "wildcard",
  "binary",
  "unary",
  "condition",
  "block",
  "filter",
  "variable",
  "function",
]);

/** Arithmetic, comparison (deep equality over at most the input) and logic; not `&` nor `..`. */
const BINARY = new Set([
  "+",
  "-",
  "*",
  "/",
  "%",
  "<",
  "<=",
  ">",
  ">=",
  "=",
  "!=",
  "and",
  "or",
  "in",
]);

/**
 * Built-in functions that answer a number or a boolean, in one pass over their arguments and no
 * allocation: not `$length` (it makes an array of the string's characters).
 */
const FUNCTIONS = new Set([
  ...["sum", "count", "max", "min", "average", "abs", "floor", "ceil", "round", "sqrt"],
  ...["number", "boolean", "not", "exists", "type"],
]);
/** Only without arguments: `$now` formats a picture, whose width can be any number. */
const CLOCK = new Set(["now", "millis"]);
/** Literals: an equality with one on either side costs at most the literal. */
const LITERALS = new Set(["string", "number", "value"]);
const literal = (n: unknown): boolean => {
  const t = (n as Node | null)?.type;
  return typeof t === "string" && LITERALS.has(t);
};

/** `$` (the context), `$$` (the input) and `$params`: no variable an expression binds. */
const VARIABLES = new Set(["", "$", "params"]);
/** Variables that reach past the current item: out of place in a later step of a path. */
const OUTER = new Set(["$", "params"]);

function nodeAllowed(n: Node): boolean {
  switch (n.type) {
    case "binary":
      // Deep equality of two objects sorts both key lists (a second for 10 MB): one side known.
      if (n.value === "=" || n.value === "!=") return literal(n.lhs) || literal(n.rhs);
      return BINARY.has(String(n.value));
    case "unary":
      return n.value === "-";
    case "variable":
      return VARIABLES.has(String(n.value));
    case "function": {
      const p = n.procedure as Node | undefined;
      if (p?.type !== "variable") return false;
      const name = String(p.value);
      return FUNCTIONS.has(name) || (CLOCK.has(name) && (n.arguments as unknown[]).length === 0);
    }
    default:
      return typeof n.type !== "string" || NODE_TYPES.has(n.type);
  }
}

/** `outerRef`: a reference to `$$` or `$params` here would repeat one value for every item. */
function bounded(node: unknown, outerRefBanned: boolean): boolean {
  if (Array.isArray(node)) return node.every((x) => bounded(x, outerRefBanned));
  if (typeof node !== "object" || node === null) return true;
  const n = node as Node;
  // A path's group-by (`items{key: value}`) constructs an object, as `{…}` does.
  if (!nodeAllowed(n) || (n.type === "path" && n.group !== undefined)) return false;
  if (n.type === "variable" && outerRefBanned && OUTER.has(String(n.value))) return false;
  if (n.type === "function") return bounded(n.arguments, outerRefBanned);
  for (const [key, value] of Object.entries(n)) {
    if (key === "value") continue; // a literal or an operator, never a step
    if (n.type === "path" && key === "steps") {
      if (!(value as unknown[]).every((s, i) => step(s as Node, outerRefBanned || i > 0)))
        return false;
    } else if (!bounded(value, outerRefBanned)) return false;
  }
  return true;
}

/** A path step: its filters see each item, so they may compare it with the input or `$params`. */
function step(s: Node, outerRefBanned: boolean): boolean {
  const { stages, ...rest } = s;
  return bounded(rest, outerRefBanned) && bounded(stages, false);
}

const known = new LRUCache<string, boolean>({ max: 10_000 });

/** Whether `text` may be evaluated on the service's own thread, within JSONata's guardrails. */
export function isBounded(text: string): boolean {
  let yes = known.get(text);
  if (yes === undefined) {
    try {
      yes = bounded(jsonata(text).ast(), false);
    } catch {
      yes = false; // not valid JSONata: the expression processes report its error
    }
    known.set(text, yes);
  }
  return yes;
}
