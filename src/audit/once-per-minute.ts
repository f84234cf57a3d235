import type { Clock } from "../clock.ts";

const MINUTE_MS = 60_000;

/**
 * Admits each key once per clock minute (docs/audit.md, "Token use"): a token used a thousand
 * times a minute is one entry, not a thousand. At most `max` keys a minute are admitted, so a
 * caller inventing a new token per request cannot grow the table (or this map) without bound.
 */
export function oncePerMinute(clock: Clock, max = 10_000): (key: string) => boolean {
  let minute = -1;
  let seen = new Set<string>();
  return (key) => {
    const now = Math.floor(clock.now() / MINUTE_MS);
    if (now !== minute) {
      minute = now;
      seen = new Set();
    }
    if (seen.has(key) || seen.size >= max) return false;
    seen.add(key);
    return true;
  };
}
