/**
 * A failed script's Python traceback as the run detail shows it (docs/live-progress.md,
 * "Tracebacks"): the frames of the user's own files, innermost last, each with its line of code;
 * the harness's frames are never among them.
 */
export interface TraceFrame {
  file: string;
  line: number;
  function: string;
  /** The source line, stripped; "" when Python could not read it. */
  code: string;
}

export interface Traceback {
  type: string;
  message: string;
  frames: TraceFrame[];
  /** Python's own rendering (chained exceptions included), the harness frames left out. */
  text: string;
  /** A flow run: the node whose script failed. */
  nodeId?: string | undefined;
}

/** Frames past this many keep the innermost (a deep recursion says enough with its last ones). */
const MAX_FRAMES = 50;
const MAX_CODE = 300;
const MAX_TEXT = 16_000;

/** Frames as the harness sent them, checked: anything malformed is dropped, sizes are bounded. */
export function readFrames(raw: unknown): TraceFrame[] {
  if (!Array.isArray(raw)) return [];
  const out: TraceFrame[] = [];
  for (const f of raw.slice(-MAX_FRAMES)) {
    if (typeof f !== "object" || f === null) continue;
    const r = f as Record<string, unknown>;
    if (typeof r.file !== "string" || typeof r.line !== "number" || !Number.isInteger(r.line))
      continue;
    out.push({
      file: r.file.slice(0, MAX_CODE),
      line: r.line,
      function: typeof r.function === "string" ? r.function.slice(0, MAX_CODE) : "",
      code: typeof r.code === "string" ? r.code.slice(0, MAX_CODE) : "",
    });
  }
  return out;
}

/**
 * A task error as one line, the way Python ends a traceback: `ValueError: bad order 7`, and the
 * type alone for an exception without a message (`raise ValueError()`), not `ValueError: `.
 */
export function errorLine(error: { type: string; message: string }): string {
  return error.message ? `${error.type}: ${error.message}` : error.type;
}

/** A task error's traceback, when the script raised (not a kill, a timeout or a runner refusal). */
export function tracebackOf(
  error: { type: string; message: string; traceback?: string; frames?: TraceFrame[] } | undefined,
): Traceback | undefined {
  if (!error?.traceback) return undefined;
  return {
    type: error.type,
    message: error.message,
    frames: error.frames ?? [],
    text: error.traceback.slice(0, MAX_TEXT),
  };
}

const isTraceback = (v: unknown): v is Traceback =>
  typeof v === "object" && v !== null && Array.isArray((v as Traceback).frames);

/**
 * The traceback a run's record holds: a task's own, or a flow run's failed script node's (with its
 * node ID). Undefined when the run did not fail in a script.
 */
export function recordedTraceback(
  detail: Record<string, unknown> | null | undefined,
): Traceback | undefined {
  if (!detail) return undefined;
  if (isTraceback(detail.traceback)) return detail.traceback;
  if (!Array.isArray(detail.nodes) || typeof detail.failedNodeId !== "string") return undefined;
  const node = (detail.nodes as { nodeId?: unknown; traceback?: unknown }[]).find(
    (n) => n.nodeId === detail.failedNodeId,
  );
  return isTraceback(node?.traceback)
    ? { ...node.traceback, nodeId: detail.failedNodeId }
    : undefined;
}
