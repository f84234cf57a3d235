import { MAX_JSON_DEPTH, tooDeep } from "../schema/json-depth.ts";
import { unsafeIntegerPath } from "../schema/json-integers.ts";
import { readFrames, type TraceFrame } from "./traceback.ts";

/**
 * What a task sends back, held within its limits: stdout and stderr capped, and the result line
 * read as a message (docs/script-service.md).
 */

/**
 * The first `cap` bytes a pipe sent, in one buffer grown by doubling: never more than `cap` bytes
 * held, however the sender splits its writes (a Buffer kept per chunk costs far more than its
 * bytes when a script writes one byte at a time).
 */
export class Bytes {
  #buf: Buffer | undefined;
  /** Until a second chunk comes, the first is kept as it came: most tasks send one. */
  #only: Buffer | undefined;
  #len = 0;
  readonly cap: number;
  constructor(cap: number) {
    this.cap = cap;
  }
  get length(): number {
    return this.#len;
  }
  /** Appends what fits under the cap; returns how many bytes of `b` were kept. */
  append(b: Buffer): number {
    const n = Math.min(b.length, this.cap - this.#len);
    if (n <= 0) return 0;
    if (this.#len === 0) {
      this.#only = n === b.length ? b : b.subarray(0, n);
      this.#len = n;
      return n;
    }
    if (this.#only) {
      this.#buf = this.#only;
      this.#only = undefined;
    }
    const need = this.#len + n;
    if (!this.#buf || this.#buf.length < need) {
      const grown = Buffer.allocUnsafe(
        Math.min(this.cap, Math.max(need, 2 * (this.#buf?.length ?? 0), 256)),
      );
      this.#buf?.copy(grown, 0, 0, this.#len);
      this.#buf = grown;
    }
    b.copy(this.#buf, this.#len, 0, n);
    this.#len = need;
    return n;
  }
  bytes(): Buffer {
    return this.#only ?? this.#buf?.subarray(0, this.#len) ?? Buffer.alloc(0);
  }
}

/**
 * stdout or stderr: the first `cap` bytes are kept, the rest is read and dropped so a chatty
 * script never blocks on a full pipe, but only up to `drain` bytes in all: past that the pipe is
 * no longer read and the task is killed (docs/script-service.md).
 */
export class Capped {
  readonly #kept: Bytes;
  #total = 0;
  readonly drain: number;
  constructor(cap: number, drain: number) {
    this.#kept = new Bytes(cap);
    this.drain = drain;
  }
  /** How many more bytes are kept. */
  room(): number {
    return this.#kept.cap - this.#kept.length;
  }
  /** False once the stream sent more than `drain` bytes. */
  push(b: Buffer): boolean {
    this.#kept.append(b);
    this.#total += b.length;
    return this.#total <= this.drain;
  }
  text(): string {
    const s = this.#kept.bytes().toString("utf8");
    const dropped = this.#total - this.#kept.length;
    if (!dropped) return s;
    return `${s}\n[output truncated: ${dropped} more bytes discarded]\n`;
  }
}

/** The note `Capped.text` ends a cut stream with: what comes before it was cut at the cap. */
export const OUTPUT_CUT_NOTE = /\n\[output truncated: \d+ more bytes discarded\]\n$/;

export type TaskError = {
  type: string;
  message: string;
  traceback?: string;
  /** The user's own frames (docs/live-progress.md, "Tracebacks"). */
  frames?: TraceFrame[];
};

export type ResultMessage =
  | { ok: true; value: unknown }
  | { ok: false; error: TaskError }
  | { exit: number; text?: string };

const unreadable: ResultMessage = {
  ok: false,
  error: { type: "ProtocolError", message: "unreadable result" },
};

const deepValue: ResultMessage = {
  ok: false,
  error: { type: "ValueError", message: `return value nests deeper than ${MAX_JSON_DEPTH} levels` },
};

/** The task's result line as a message; anything else a script may have written is unreadable. */
export function readResult(line: Buffer): ResultMessage {
  const text = line.toString("utf8");
  let m: unknown;
  try {
    m = JSON.parse(text);
  } catch {
    return unreadable;
  }
  if (typeof m !== "object" || m === null) return unreadable;
  const r = m as Record<string, unknown>;
  if (r.ok === true) {
    // Written by the task's own code, which can write any line: a value nesting deeper than a
    // request body may is refused here, before any walk of it in the service recurses.
    if (tooDeep(text, r.value)) return deepValue;
    return unroundedValue(text, r.value);
  }
  // sys.exit(True) reports a bool, which Python exits with as 1; sys.exit("text") its text.
  if (typeof r.exit === "number" || typeof r.exit === "boolean")
    return typeof r.text === "string"
      ? { exit: Number(r.exit), text: r.text }
      : { exit: Number(r.exit) };
  const e = r.error as Record<string, unknown> | null | undefined;
  if (r.ok === false && typeof e?.type === "string" && typeof e.message === "string") {
    const error: TaskError = { type: e.type, message: e.message };
    if (typeof e.traceback === "string") error.traceback = e.traceback;
    const frames = readFrames(e.frames);
    if (frames.length > 0) error.frames = frames;
    return { ok: false, error };
  }
  return unreadable;
}

/**
 * A return value with an integer past ±(2^53 − 1) fails the task naming it: JSON.parse rounded it,
 * and the caller would get another number than the script returned (docs/script-service.md).
 */
function unroundedValue(text: string, value: unknown): ResultMessage {
  const at = unsafeIntegerPath(text, "$");
  if (at === undefined) return { ok: true, value };
  const where = at.startsWith("$.value") ? `return value${at.slice("$.value".length)}` : at;
  const message = `${where} is an integer beyond ±(2^53 − 1), which would not be kept exactly; return it as a string`;
  return { ok: false, error: { type: "ValueError", message } };
}

const KiB = 1024;
const MiB = 1024 * KiB;

/**
 * Most the result pipe may carry: the value's limit plus room for the message around it and for
 * Python's number spellings (docs/script-service.md). A longer line is never parsed.
 */
export const resultLineCap = (resultBytes: number): number =>
  resultBytes + Math.max(64 * KiB, Math.floor(resultBytes / 8));

/** Most stdout or stderr is read (and, past the output limit, dropped) before the task is killed. */
export const outputDrainCap = (outputBytes: number): number => Math.max(64 * outputBytes, 64 * MiB);
