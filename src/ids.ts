import { randomBytes } from "node:crypto";

const ALPHABET = "0123456789abcdefghijklmnopqrstuvwxyz";
let lastMs = 0;
let seq = 0;

/**
 * Unique, time-ordered IDs (contract §8): 9 base-36 chars of milliseconds, 3 of a per-ms
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
  const rand = randomBytes(8);
  let tail = "";
  for (const byte of rand) tail += ALPHABET[byte % 36];
  return time + counter + tail;
}
