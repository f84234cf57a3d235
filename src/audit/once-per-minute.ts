import type { Clock } from "../clock.ts";

const MINUTE_MS = 60_000;

/**
 * Admits each key `times` times per clock minute (docs/audit.md, "Token use"): a token used a
 * thousand times a minute is one entry, not a thousand. At most `max` keys a minute are admitted,
 * so a caller inventing a new key per request cannot grow the table (or this map) without bound.
 */
export function perMinute(clock: Clock, times: number, max = 10_000): (key: string) => boolean {
  let minute = -1;
  let seen = new Map<string, number>();
  return (key) => {
    const now = Math.floor(clock.now() / MINUTE_MS);
    if (now !== minute) {
      minute = now;
      seen = new Map();
    }
    const n = seen.get(key) ?? 0;
    if (n >= times || (n === 0 && seen.size >= max)) return false;
    seen.set(key, n + 1);
    return true;
  };
}

export const oncePerMinute = (clock: Clock, max = 10_000) => perMinute(clock, 1, max);
