/**
 * Integers a JSON text spells past ±(2^53 − 1) (docs/errors.md, "How fields are read"). Other
 * readers keep them (Go's int64, Java's long, Python's int); JavaScript's JSON.parse would round
 * them to the nearest double, so a run would go on with a different number than the caller sent
 * (an order ID 1789012345678901234 becomes 1789012345678901200). Such a body is refused naming the
 * field, as every other value that cannot be taken as sent.
 *
 * Found by scanning the text once, not by parsing it again: a body is as large as the body limit,
 * and a second parse that hands each value's source to a reviver cost fifteen times the first on a
 * body of many long numbers (docs/errors.md).
 */

/**
 * A number past the safe range has at least 16 digits: texts without such a run are not scanned.
 * A JSON number starts the text or follows whitespace, `:`, `,` or `[`; a run inside a string (an
 * order number sent as text) mostly does not, and costs no walk.
 */
const LONG_DIGITS = /\d{16}/;
const LONG_NUMBER = /(?:^|[\s:,[])-?\d{16}/;
/** The first, quick test finds the run; the second, slower one, whether a number holds it. */
const longNumber = (text: string): boolean => LONG_DIGITS.test(text) && LONG_NUMBER.test(text);

const QUOTE = 34;
const BACKSLASH = 92;
const MINUS = 45;
const ZERO = 48;
const NINE = 57;

/** Where the string literal opening at `start` ends (one past its closing quote). */
function stringEnd(text: string, start: number): number {
  let close = text.indexOf('"', start + 1);
  for (;;) {
    let slashes = 0;
    while (text.charCodeAt(close - 1 - slashes) === BACKSLASH) slashes++;
    if (slashes % 2 === 0 || close < 0) return close < 0 ? text.length : close + 1;
    close = text.indexOf('"', close + 1);
  }
}

/** Where the number starting at `start` ends, and where its integer part ends. */
function numberAt(text: string, start: number): { end: number; integerEnd: number } {
  let i = text.charCodeAt(start) === MINUS ? start + 1 : start;
  while (i < text.length && text.charCodeAt(i) >= ZERO && text.charCodeAt(i) <= NINE) i++;
  const integerEnd = i;
  while (i < text.length && /[\d.eE+-]/.test(text[i] ?? "")) i++;
  return { end: i, integerEnd };
}

/** An integer (no fraction, no exponent: those are doubles as sent) a double cannot hold. */
const unsafeInteger = (text: string, start: number, integerEnd: number, end: number): boolean =>
  end === integerEnd &&
  integerEnd - start - (text.charCodeAt(start) === MINUS ? 1 : 0) >= 16 &&
  !Number.isSafeInteger(Number(text.slice(start, integerEnd)));

/**
 * The path (`body.parameter.orders.0.id`, with `prefix` first) of the first integer in `text`
 * that JavaScript cannot hold exactly, or undefined. `text` must be valid JSON. One pass over the
 * text, strings skipped whole (no digit inside one counts); keys are named as they are, a dot
 * included, as in every other 400 detail.
 */
export function unsafeIntegerPath(text: string, prefix = "body"): string | undefined {
  if (!longNumber(text)) return undefined;
  return walk(text, prefix, unsafeInteger, text.length)?.path;
}

/**
 * An exponent of three digits. A number past a double's range has one, or 309 digits and so a run
 * of 16 (LONG_DIGITS): both tests cost a bounded look at each character (`\d{309}` would look
 * 309 characters ahead of each digit, seconds on a body of 308-digit numbers).
 */
const EXPONENT = /[eE][+-]?\d{3}/;
/**
 * EXPONENT in a number, where JSON puts one: after the digits of a number that starts where a
 * value may. "node123" or a UUID's "5e67…" in a string is none (a third of random UUIDs hold an
 * "e" and three digits), and walking every such body cost more than its parse.
 */
const NUMBER_EXPONENT = /(?:^|[\s:,[])-?\d+(?:\.\d+)?[eE][+-]?\d{3}/;
const exponentNumber = (text: string): boolean => EXPONENT.test(text) && NUMBER_EXPONENT.test(text);

/**
 * Whether numberProblem walks `text`: only when a number (not a string) in it may be past what a
 * double holds. Exported for its test.
 */
export const numbersToWalk = (text: string): boolean => longNumber(text) || exponentNumber(text);

/**
 * A number that may be past a double's range, read to tell: 309 characters or more, an exponent
 * of three digits, or an exponent or fraction after 16 integer digits (210 digits and `e99` are
 * 1e308 and more: an exponent of two digits needs a long integer part to get there).
 */
const nonFinite = (text: string, start: number, integerEnd: number, end: number): boolean =>
  (end - start > 308 ||
    (end > integerEnd &&
      (integerEnd - start >= 16 || EXPONENT.test(text.slice(integerEnd, end))))) &&
  !Number.isFinite(Number(text.slice(start, end)));

/**
 * The 400 detail for the first number in `text` that JSON.parse did not keep as sent, or
 * undefined (docs/errors.md, "How fields are read"): an integer past ±(2^53 − 1), which it
 * rounds, or a number past a double's range (`1e400`), which it reads as Infinity and
 * JSON.stringify writes as null. One walk, only over texts with a number of 16 digits or with
 * an exponent of three.
 */
export function numberProblem(text: string, prefix = "body"): string | undefined {
  const long = longNumber(text);
  if (!long && !exponentNumber(text)) return undefined;
  const hit = walk(
    text,
    prefix,
    (t, s, i, e) => (long && unsafeInteger(t, s, i, e)) || nonFinite(t, s, i, e),
    text.length,
  );
  if (!hit) return undefined;
  return unsafeInteger(text, hit.start, hit.integerEnd, hit.end)
    ? unsafeIntegerDetail(hit.path)
    : `${hit.path} is a number beyond ±1.8e308, which a double cannot hold; send it as a string`;
}

/**
 * The path of the value or key that holds offset `at` of a JSON text cut there (the text before
 * a byte that is not UTF-8): `body.parameter.name`, or `body.parameter (a key)`.
 */
export function jsonPathAt(text: string, at: number, prefix = "body"): string {
  return walk(text, prefix, () => false, at)?.path ?? prefix;
}

type BadNumber = (text: string, start: number, integerEnd: number, end: number) => boolean;
/** Where the walk stopped: the path, and the number it picked (-1 when it stopped at an offset). */
type Hit = { path: string; start: number; integerEnd: number; end: number };

/**
 * One pass over `text`, strings skipped whole: the path of the first number `bad` picks, or of
 * what is open at offset `stop` (inside a string: that string's value, or the key it is).
 */
function walk(text: string, prefix: string, bad: BadNumber, stop: number): Hit | undefined {
  const levels: Level[] = [];
  const path = (drop = 0) =>
    [prefix, ...levels.slice(0, levels.length - drop).map((l) => nameOf(text, l))].join(".");
  let expectKey = false;
  for (let i = 0; i < text.length; ) {
    if (i >= stop) return { path: path(), start: -1, integerEnd: -1, end: -1 };
    const c = text.charCodeAt(i);
    const top = levels[levels.length - 1];
    if (c === QUOTE) {
      const end = stringEnd(text, i);
      const isKey = expectKey && top !== undefined && top.index === undefined;
      if (end > stop)
        return { path: isKey ? `${path(1)} (a key)` : path(), start: -1, integerEnd: -1, end: -1 };
      if (isKey) top.key = i; // read only if the path is asked for
      i = end;
      continue;
    }
    if (c === MINUS || (c >= ZERO && c <= NINE)) {
      const { end, integerEnd } = numberAt(text, i);
      if (bad(text, i, integerEnd, end)) return { path: path(), start: i, integerEnd, end };
      i = end;
      continue;
    }
    if (c === 123 /* { */) {
      levels.push({ key: undefined, index: undefined });
      expectKey = true;
    } else if (c === 91 /* [ */) {
      levels.push({ key: undefined, index: 0 });
      expectKey = false;
    } else if (c === 125 /* } */ || c === 93 /* ] */) {
      levels.pop();
      expectKey = false; // a value ended: a key comes only after the next comma of an object
    } else if (c === 44 /* , */) {
      if (top?.index !== undefined) top.index++;
      else expectKey = true;
    } else if (c === 58 /* : */) {
      expectKey = false;
    }
    i++;
  }
  return undefined;
}

/** Where a value sits while the text is walked: its key's literal (offset), or its index. */
type Level = { key: number | undefined; index: number | undefined };

const nameOf = (text: string, level: Level): string =>
  level.key === undefined
    ? String(level.index)
    : (JSON.parse(text.slice(level.key, stringEnd(text, level.key))) as string);

/** The 400 detail for an integer at `path` (docs/errors.md, "400 messages"). */
export const unsafeIntegerDetail = (path: string): string =>
  `${path} is an integer beyond ±(2^53 − 1), which would not be kept exactly; send it as a string`;
