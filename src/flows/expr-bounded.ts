/**
 * Which expressions the service may evaluate itself (docs/security.md, "Flow expressions"):
 * those built only of steps whose cost JSONata's own guardrails can bound. JSONata checks its
 * time limit at every evaluation step, so a path, a filter or arithmetic over the data stops at
 * the limit; what it cannot stop is one native step that runs long or allocates much by itself
 * (a regular expression, a range, a sort, a padded string) or code the expression defines
 * (functions, bindings, `$eval`). An expression with any of these goes to the expression
 * processes. The rule is an allowlist: anything not named here is not bounded.
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

/** Built-in functions whose cost follows the size of their arguments, in one pass or close. */
const FUNCTIONS = new Set([
  ...["sum", "count", "max", "min", "average", "abs", "floor", "ceil", "round", "sqrt"],
  ...["number", "boolean", "not", "exists", "type", "string", "length", "trim"],
  ...["substring", "substringBefore", "substringAfter", "lowercase", "uppercase", "contains"],
  ...["split", "join", "keys", "lookup", "append", "merge", "spread", "reverse"],
  // Not those that take a picture: parsing one builds a regular expression.
  ...["now", "millis"],
  ...["encodeUrl", "encodeUrlComponent", "decodeUrl", "decodeUrlComponent"],
  ...["base64encode", "base64decode"],
]);

/** `$` (the context), `$$` (the input) and `$params`: no variable an expression binds. */
const VARIABLES = new Set(["", "$", "params"]);

function bounded(node: unknown): boolean {
  if (Array.isArray(node)) return node.every(bounded);
  if (typeof node !== "object" || node === null) return true;
  const n = node as Node;
  if (typeof n.type === "string") {
    if (!NODE_TYPES.has(n.type)) return false;
    if (n.type === "binary" && n.value === "..") return false; // a range allocates in one step
    if (n.type === "unary" && n.value !== "-" && n.value !== "[" && n.value !== "{") return false;
    if (n.type === "variable" && !VARIABLES.has(String(n.value))) return false;
    if (n.type === "function") {
      const p = n.procedure as Node | undefined;
      if (p?.type !== "variable" || !FUNCTIONS.has(String(p.value))) return false;
      return bounded(n.arguments);
    }
  }
  for (const [key, value] of Object.entries(n)) {
    // `value` holds a literal or an operator, never a step (a regex's is its RegExp: refused above).
    if (key !== "value" && !bounded(value)) return false;
  }
  return true;
}

const known = new LRUCache<string, boolean>({ max: 10_000 });

/** Whether `text` may be evaluated on the service's own thread, within JSONata's guardrails. */
export function isBounded(text: string): boolean {
  let yes = known.get(text);
  if (yes === undefined) {
    try {
      yes = bounded(jsonata(text).ast());
    } catch {
      yes = false; // not valid JSONata: the expression processes report its error
    }
    known.set(text, yes);
  }
  return yes;
}
