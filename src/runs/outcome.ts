import type { Configure } from "../flows/graph.ts";
import type { RunEnd } from "../store/types.ts";

/** How an executor's work ended, before the lifecycle applies the limits and records it. */
export interface Outcome {
  status: RunEnd["status"];
  /** SUCCESS: the value, serialised and checked against the result limit by the lifecycle. */
  value?: unknown;
  /** FAILURE or CANCELED: what went wrong; its first line is the summary. */
  error?: string | undefined;
  /** SUCCESS: what the run did ("3 nodes"); the lifecycle adds the result's size. */
  summary?: string | undefined;
  /** FAILURE: a prefix of the summary (the failed node). */
  summaryPrefix?: string | undefined;
  stdout?: string | undefined;
  stderr?: string | undefined;
  detail?: Record<string, unknown> | undefined;
}

/** What executing one run gave: its outcome and, for a flow, its release's configuration. */
export interface Execution {
  outcome: Outcome;
  configure?: Configure | undefined;
  /** Called once the end is recorded (or its recording failed): the run's files may go then. */
  afterEnd?: (() => void) | undefined;
}

/** Why the lifecycle stopped a run early; the executor's signal aborts with one of these. */
export class RunStop extends Error {
  readonly reason: "terminate" | "timeout" | "limit";
  constructor(reason: RunStop["reason"], message: string) {
    super(message);
    this.reason = reason;
  }
}

export function limitMessage(maxRunS: number): string {
  return `run timed out: it exceeded the system limit of ${maxRunS}s (MAX_RUN_S)`;
}

/**
 * The recorded end of an outcome (docs/architecture.md, "Limits"): a SUCCESS whose serialised
 * result is over `resultBytes` ends FAILURE with ResultTooLarge, the same for flows and tasks.
 */
export function toEnd(o: Outcome, endTime: number, resultBytes: number): RunEnd {
  const base = {
    endTime,
    ...(o.stdout !== undefined ? { stdout: storable(o.stdout) } : {}),
    ...(o.stderr !== undefined ? { stderr: storable(o.stderr) } : {}),
    ...(o.detail !== undefined ? { detail: o.detail } : {}),
  };
  if (o.status === "SUCCESS") {
    const result = jsonOf(o.value ?? null);
    if (typeof result !== "string") {
      const error = `ValueError: the return value cannot be written as JSON (${result.message})`;
      return { ...base, status: "FAILURE", summary: error, error };
    }
    const size = Buffer.byteLength(result);
    if (size > resultBytes) {
      const error = `ResultTooLarge: the return value is ${size} bytes, over the ${resultBytes} byte limit`;
      return { ...base, status: "FAILURE", summary: error, error };
    }
    const summary = `${o.summary ? `${o.summary}, ` : ""}result ${size} bytes`;
    return { ...base, status: "SUCCESS", result, summary };
  }
  const error = storable(o.error ?? (o.status === "CANCELED" ? "canceled" : "failed"));
  const summary = storable(`${o.summaryPrefix ?? ""}${error}`.split("\n")[0] ?? error);
  return { ...base, status: o.status, summary, error };
}

/**
 * Text a run keeps as it is written (stdout, stderr, an error): PostgreSQL keeps no U+0000 in
 * text, and a script's output or its exception's message may hold one. It is kept as U+FFFD, the
 * same in both stores (docs/script-service.md, "Writing scripts").
 */
export const storable = (text: string): string =>
  text.includes("\0") ? text.replaceAll("\0", "\uFFFD") : text;

/**
 * The value as JSON, or why it cannot be: JSON.stringify recurses, and a value that nests too
 * deep overflows its stack (script results are checked before, docs/script-service.md "Writing scripts"; this keeps
 * a run's end from throwing whatever an executor made).
 */
function jsonOf(value: unknown): string | Error {
  try {
    return JSON.stringify(value);
  } catch (err) {
    return err instanceof Error ? err : new Error(String(err));
  }
}
