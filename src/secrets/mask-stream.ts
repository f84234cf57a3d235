import { MASK, maskOrder, maskText } from "./mask.ts";

/**
 * The masking rule of docs/secrets.md for output read as it is printed: a chunk may end inside a
 * secret value, so the end of a chunk that could begin one is held back until the next chunk (or
 * the end) shows whether it does. What leaves has every given value as `***`.
 */
export function createStreamMasker(values: readonly string[] | undefined) {
  const order = maskOrder(values ?? []);
  let held = "";
  return {
    push(chunk: string): string {
      if (order.length === 0) return chunk;
      const text = maskText(held + chunk, order);
      const from = heldFrom(text, order);
      held = text.slice(from);
      return text.slice(0, from);
    },
    /** The stream ended: what was held back could not begin a value after all. */
    end(): string {
      const out = held;
      held = "";
      return out;
    },
  };
}

/** The earliest position whose rest is a proper start of a value (nothing masked already). */
function heldFrom(text: string, values: readonly string[]): number {
  let from = text.length;
  for (const v of values) {
    const first = v[0] as string;
    for (let i = text.indexOf(first, Math.max(0, text.length - v.length + 1)); i >= 0; ) {
      if (v.startsWith(text.slice(i)) && !text.slice(i).startsWith(MASK)) {
        from = Math.min(from, i);
        break;
      }
      i = text.indexOf(first, i + 1);
    }
  }
  return from;
}
