/**
 * What a syntax check answers (syntax-check.ts), and how the checker's last line of output,
 * `{ok, index, kind, line, message}` from python/syntax_check.py, becomes that answer.
 */

export interface CheckedFile {
  /** The name compile() sees, and messages give. */
  name: string;
  /** Exactly the bytes the task will load. */
  bytes: Uint8Array;
  /** Loaded as text decoded strictly as UTF-8 (a package's main.py), not compiled as bytes. */
  decode?: boolean;
}

export type SyntaxVerdict =
  | { ok: true }
  | {
      ok: false;
      /**
       * `syntax`: the file does not compile (`line` when Python names one); `limit`: over the
       * .py size limit, or the check ran out of its memory or time; `refused`: no sandbox to
       * check in; `failed`: the check itself broke.
       */
      reason: "syntax" | "limit" | "refused" | "failed";
      file?: string;
      line?: number;
      message: string;
    };

/** The verdict in the checker's output; undefined when the output is not one. */
export function parse(stdout: string, files: CheckedFile[]): SyntaxVerdict | undefined {
  let out: {
    ok?: boolean;
    index?: number;
    kind?: string;
    line?: number | null;
    message?: string;
  };
  try {
    out = JSON.parse(stdout.trim().split("\n").pop() ?? "");
  } catch {
    return undefined;
  }
  if (out.ok === true) return { ok: true };
  const file = files[out.index ?? -1]?.name;
  if (file === undefined || typeof out.message !== "string") return undefined;
  if (out.kind === "memory") {
    return {
      ok: false,
      reason: "limit",
      file,
      message: `out of memory: ${out.message}, the memory limit of a script (SCRIPT_MEMORY_BYTES)`,
    };
  }
  return typeof out.line === "number"
    ? { ok: false, reason: "syntax", file, line: out.line, message: out.message }
    : { ok: false, reason: "syntax", file, message: out.message };
}
