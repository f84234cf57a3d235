/**
 * How deep a JSON value may nest (arrays and objects), docs/errors.md "Bad input": request bodies
 * and the values script tasks send back (docs/script-service.md). JSON.parse does not recurse, but
 * every walk after it (a store's JSON.stringify among them) does, and overflows the stack on
 * deeper nesting.
 */
export const MAX_JSON_DEPTH = 512;

/** Whether `value` nests arrays/objects more than `max` levels, walked without recursion. */
export function nestedDeeperThan(value: unknown, max: number): boolean {
  const stack: [unknown, number][] = [[value, 1]];
  for (let top = stack.pop(); top; top = stack.pop()) {
    const [v, depth] = top;
    if (v === null || typeof v !== "object") continue;
    if (depth > max) return true;
    for (const child of Array.isArray(v) ? v : Object.values(v))
      if (child !== null && typeof child === "object") stack.push([child, depth + 1]);
  }
  return false;
}

/**
 * Whether the value parsed from `text` nests deeper than MAX_JSON_DEPTH. Each level takes two
 * characters at least: a shorter text (every usual value) cannot, and is not walked again.
 */
export const tooDeep = (text: string, value: unknown): boolean =>
  text.length > 2 * MAX_JSON_DEPTH && nestedDeeperThan(value, MAX_JSON_DEPTH);
