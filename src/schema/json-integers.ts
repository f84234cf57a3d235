/**
 * Integers a JSON body spells past ±(2^53 − 1) (docs/errors.md, "How fields are read"). Other
 * readers keep them (Go's int64, Java's long, Python's int); JavaScript's JSON.parse would round
 * them to the nearest double, so a run would go on with a different number than the caller sent
 * (an order ID 1789012345678901234 becomes 1789012345678901200). Such a body is refused naming the
 * field, as every other value that cannot be taken as sent.
 */

/** A number past the safe range has at least 16 digits: texts without such a run skip the walk. */
const LONG_DIGITS = /\d{16}/;
/** The source of an integer literal: no fraction, no exponent (1e300 is a double as sent). */
const INTEGER_TEXT = /^-?\d+$/;

/** Stands for the first unsafe integer while its path is looked for. */
const FIRST = Symbol("first unsafe integer");

type JsonWithSource = (
  this: unknown,
  key: string,
  value: unknown,
  context: { source?: string },
) => unknown;

/**
 * The path (`body.parameter.orders.0.id`, with `prefix` first) of the first integer in `text`
 * that JavaScript cannot hold exactly, or undefined. `text` must be valid JSON.
 */
export function unsafeIntegerPath(text: string, prefix = "body"): string | undefined {
  if (!LONG_DIGITS.test(text)) return undefined;
  let found = false;
  // Node's JSON.parse gives a reviver each primitive's source text; revivers run depth first in
  // document order, so the first one marked is the first in the text.
  const reviver: JsonWithSource = (_key, value, context) => {
    if (
      !found &&
      typeof value === "number" &&
      !Number.isSafeInteger(value) &&
      context.source !== undefined &&
      INTEGER_TEXT.test(context.source)
    ) {
      found = true;
      return FIRST;
    }
    return value;
  };
  const root = JSON.parse(text, reviver as (key: string, value: unknown) => unknown) as unknown;
  return found ? pathTo(root, prefix) : undefined;
}

/** Where FIRST is, walked without recursion (a body may nest up to MAX_JSON_DEPTH levels). */
function pathTo(root: unknown, prefix: string): string | undefined {
  const stack: [unknown, string][] = [[root, prefix]];
  for (let top = stack.pop(); top; top = stack.pop()) {
    const [value, at] = top;
    if (value === FIRST) return at;
    if (value === null || typeof value !== "object") continue;
    for (const [key, child] of Object.entries(value)) stack.push([child, `${at}.${key}`]);
  }
  return undefined;
}

/** The 400 detail for an integer at `path` (docs/errors.md, "400 messages"). */
export const unsafeIntegerDetail = (path: string): string =>
  `${path} is an integer beyond ±(2^53 − 1), which would not be kept exactly; send it as a string`;
