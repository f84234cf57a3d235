/**
 * Whether a value is small once written out as JSON, found without writing it and given up past a
 * budget: asking costs at most the budget. Values in the service can refer to one part many times
 * (a map of `$params` over many records, a merge of one node's output twice), which is small in
 * memory and enormous once written out or walked; the service's thread takes only values whose
 * written-out size is known to be within the budget (expr-lanes.ts).
 */
/** A node's value past the limit (docs/flow-graph.md, "Node output limit"): one wording everywhere. */
export function tooLarge(what: string, limit: number): Error {
  return new Error(`ResultTooLarge: ${what} over the ${limit} byte limit (LIMIT_RESULT_BYTES)`);
}

export function jsonWithin(budget: number): (value: unknown) => boolean {
  const size = jsonSizer(budget);
  return (value) => size(value) <= budget;
}

/** About the size of a value as JSON, as sizeOf, with large walks remembered per object. */
export function jsonSizer(budget: number): (value: unknown) => number {
  // A run's parameter is every job's: each root is walked once.
  const known = new WeakMap<object, number>();
  return (value) => {
    if (typeof value !== "object" || value === null) return leaf(value, budget);
    let size = known.get(value);
    if (size === undefined) {
      size = sizeOf(value, budget);
      // Only a walk that cost something is kept: small values come and go with every run.
      if (size > REMEMBERED) known.set(value, size);
    }
    return size;
  };
}

const REMEMBERED = 10_000;

/** About the size of `value` as JSON (leaves exactly, separators about); stops just past `budget`. */
export function sizeOf(value: unknown, budget: number): number {
  let size = 0;
  // An explicit stack: data may nest deeper than the thread's stack.
  const stack: unknown[] = [value];
  while (stack.length > 0 && size <= budget) {
    const v = stack.pop();
    if (typeof v !== "object" || v === null) size += leaf(v, budget);
    else if (Array.isArray(v)) {
      size += 1 + v.length;
      for (const item of v) stack.push(item);
    } else {
      size += 2;
      for (const [k, item] of Object.entries(v)) {
        size += leaf(k, budget) + 2;
        stack.push(item);
      }
    }
  }
  return size;
}

// What JSON writes escaped, six characters or two for one: control characters, quotes,
// backslashes, lone surrogates (a pair is rare enough to be measured exactly too).
// biome-ignore lint/suspicious/noControlCharactersInRegex: the characters JSON escapes
const ESCAPED = /[\u0000-\u001f"\\\ud800-\udfff]/;

/**
 * A leaf as JSON: a number is as long as its digits (a long float is 24 characters), a string as
 * its escapes make it; a string past the budget is not scanned, its length says enough.
 */
function leaf(v: unknown, budget: number): number {
  if (typeof v === "string") {
    const plain = v.length + 2;
    return plain <= budget && ESCAPED.test(v) ? JSON.stringify(v).length : plain;
  }
  if (typeof v === "number") return Number.isFinite(v) ? String(v).length : 4;
  if (typeof v === "boolean") return v ? 4 : 5;
  return 4;
}
