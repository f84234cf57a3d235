/**
 * The one masking rule (docs/secrets.md): every occurrence of a secret value a run or task was
 * given becomes `***` in what is recorded of it (outputs, stdout, stderr, errors, node logs).
 * A safety net for values a script prints or a server echoes, not a boundary: a transformed value
 * (encoded, split) is not recognised.
 */
import { OUTPUT_CUT_NOTE } from "../scripts/python-runner-output.ts";
import type { TaskOutcome } from "../scripts/runner-types.ts";

export const MASK = "***";

export function maskText(text: string, values: readonly string[]): string {
  let out = text;
  for (const v of values) if (v !== "" && out.includes(v)) out = out.split(v).join(MASK);
  return out;
}

/**
 * A text cut at a limit (`values` in maskOrder's order): the values masked, and the start of a
 * value the cut left at its end masked too, from the first character that could begin one (a
 * character split by the cut, U+FFFD, counts with it). Masks more than needed, never less.
 */
export function maskCutText(text: string, values: readonly string[]): string {
  const out = maskText(text, values);
  const end = out.replace(/\uFFFD+$/, "");
  let from = out.length;
  for (const v of values) {
    const first = v[0];
    if (first === undefined) continue;
    // The earliest position whose rest of text is a proper start of v: the longest such start.
    for (let i = end.indexOf(first, Math.max(0, end.length - v.length + 1)); i >= 0; ) {
      if (v.startsWith(end.slice(i))) {
        from = Math.min(from, i);
        break;
      }
      i = end.indexOf(first, i + 1);
    }
  }
  return from < out.length ? out.slice(0, from) + MASK : out;
}

/** stdout or stderr as the runner keeps it: cut at the output cap, then noted (Capped). */
function maskOutput(text: string, values: readonly string[]): string {
  const note = OUTPUT_CUT_NOTE.exec(text);
  if (!note) return maskText(text, values);
  return maskCutText(text.slice(0, note.index), values) + note[0];
}

/** Longest first, so a value that contains another is masked whole. */
export function maskOrder(values: Iterable<string>): string[] {
  return [...new Set(values)].filter((v) => v !== "").sort((a, b) => b.length - a.length);
}

/** The same JSON-like value with every string (and key) masked; unchanged when nothing matches. */
export function maskDeep<T>(value: T, values: readonly string[]): T {
  if (values.length === 0) return value;
  return walk(value, maskOrder(values)) as T;
}

function walk(value: unknown, values: readonly string[]): unknown {
  if (typeof value === "string") return maskText(value, values);
  if (Array.isArray(value)) return value.map((v) => walk(v, values));
  if (typeof value === "object" && value !== null) {
    const out: Record<string, unknown> = {};
    for (const [k, v] of Object.entries(value)) out[maskText(k, values)] = walk(v, values);
    return out;
  }
  return value;
}

/** A task's outcome with the values masked where a script can put them (python-runner.ts). */
export function maskOutcome(o: TaskOutcome, values: readonly string[] | undefined): TaskOutcome {
  if (!values || values.length === 0) return o;
  const order = maskOrder(values);
  const out: TaskOutcome = {
    ...o,
    stdout: maskOutput(o.stdout, order),
    stderr: maskOutput(o.stderr, order),
  };
  if (o.value !== undefined) out.value = walk(o.value, order);
  if (o.error) out.error = walk(o.error, order) as TaskOutcome["error"];
  return out;
}
