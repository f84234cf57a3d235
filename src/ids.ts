import { createHash, randomFillSync } from "node:crypto";

const ALPHABET = "0123456789abcdefghijklmnopqrstuvwxyz";
let lastMs = 0;
let seq = 0;
// Random bytes drawn 4 KiB at a time: one call into the CSPRNG per 512 IDs instead of per ID.
const pool = Buffer.alloc(4096);
let used = pool.length;

/**
 * Unique, time-ordered IDs (docs/dataflow-service.md): 9 base-36 chars of milliseconds, 3 of a per-ms
 * sequence (so IDs made in one millisecond still sort in creation order), 8 random.
 */
export function newId(now: number = Date.now()): string {
  if (now <= lastMs) {
    seq++;
    now = lastMs;
  } else {
    lastMs = now;
    seq = 0;
  }
  const time = now.toString(36).padStart(9, "0");
  const counter = seq.toString(36).padStart(3, "0");
  if (used + 8 > pool.length) {
    randomFillSync(pool);
    used = 0;
  }
  let tail = "";
  for (let i = used; i < used + 8; i++) tail += ALPHABET[(pool[i] as number) % 36];
  used += 8;
  return time + counter + tail;
}

/**
 * An ID of newId's shape made from `key` instead of drawn: 9 base-36 chars of `at`, 11 of the
 * key's SHA-256. The same key gives the same ID, so a second creation of that record is refused
 * by its primary key (a custom error handler's run, docs/error-handlers.md, "Durable").
 */
export function derivedId(at: number, key: string): string {
  const hash = createHash("sha256").update(key).digest();
  let tail = "";
  for (let i = 0; i < 11; i++) tail += ALPHABET[(hash[i] as number) % 36];
  return Math.max(0, Math.trunc(at)).toString(36).padStart(9, "0") + tail;
}
